"""The store's scan by file events (a TaskStore mixin): which task names the events name, the
re-read of only those into the kept entries, and what the loop asks of the kept view between
scans (`still`, `scanned`). The full walk and the per-file parse stay in specs/folder/store.py.
"""

from __future__ import annotations

import functools
import os
import stat
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from specs.folder.arrayfiles import _ArraySidecars
from specs.folder.paths import (
    EDITOR_SUFFIXES,
    SIDECAR_SUFFIXES,
    TASK_SUFFIXES,
    PackedKey,
    _inside,
    _is_queue_config,
    _is_spec_file,
    _strip,
)

if TYPE_CHECKING:
    from specs.folder.store import SpecEntry, _Parsed


class _EventScan(_ArraySidecars):
    """TaskStore's scan of the names file events point at."""

    if TYPE_CHECKING:
        root: Path
        status_dir: Path | None
        settle_seconds: float
        _clock: Callable[[], float]
        _lock: threading.Lock
        _scanned: bool
        _top: str
        _links: bool
        _held: list[str]
        _reported_keys: dict[str, PackedKey]
        _seen: dict[str, tuple[PackedKey, float]]
        _missing_since: dict[str, float]
        _parsed: dict[str, _Parsed]
        _entries: dict[str, SpecEntry]
        _last_valid: dict[str, _Parsed]
        _basis: dict[str, object]
        _looked_at: set[str]

        def _scan_all(self) -> dict[str, SpecEntry]: ...

        def _take(
            self,
            name: str,
            files: list[tuple[str, str, Callable[[], os.stat_result]]],
            now: float,
            entries: dict[str, SpecEntry],
            parsed: dict[str, _Parsed],
        ) -> bool: ...

    def scan_changes(
        self, changed: Iterable[str] | None = None
    ) -> tuple[dict[str, SpecEntry], set[str] | None]:
        """scan(changed), and the task names whose entry may differ from the last scan's
        (array elements by their own names); None after a full walk: any may. For the one
        reader that scans this store (the loop; others beside it use `scanned`)."""
        with self._lock:
            names = None if changed is None else self._names_of(changed)
            if names is not None:
                entries = self._scan_names(names)
                if entries is not None:
                    return self._elements(entries, self._looked_at)
            return self._elements(self._scan_all())

    def still(self) -> bool:
        """Whether a scan that events name nothing for would read nothing either: no file is
        settling or briefly missing, the tree holds no symlink, and the root still points
        where it did (git-sync swaps it). The loop skips a pass only then."""
        with self._lock:
            if not self._scanned or self._links or self._missing_since or self._held:
                return False
            if any(self._reported_keys.get(n) != key for n, (key, _) in self._seen.items()):
                return False
            return os.path.realpath(self.root) == self._top

    def scanned(self) -> dict[str, SpecEntry] | None:
        """What the last scan returned, without reading anything; None before the first full
        scan. For a reader beside the loop (the HTTP API in `serve`) that must neither walk
        the folder nor disturb the loop's own scans."""
        with self._lock:
            if not self._scanned:
                return None
            shown = self._shown
            return dict(shown) if shown is not None else self._elements(dict(self._entries))[0]

    def _names_of(self, changed: Iterable[str]) -> set[str] | None:
        """Task names behind the changed paths; None if only a full walk can tell."""
        if not self._scanned or self._links:
            return None
        top = os.path.realpath(self.root)
        if top != self._top:
            return None  # git-sync swapped the root link: a new tree
        bases = (os.path.abspath(self.root), top)
        status = os.path.realpath(self.status_dir) if self.status_dir is not None else None
        names: set[str] = set()
        for path in changed:
            if status is not None and _inside(path, status):
                continue
            rel = next((path[len(b) + 1 :] for b in bases if path.startswith(b + os.sep)), None)
            if rel is None:
                return None
            segments = rel.split(os.sep)
            if any(s.startswith(".") for s in segments):
                continue  # hidden: temp files of atomic writes, .git; a walk skips them too
            if _is_spec_file(segments[-1]):
                name = _strip("/".join(segments), TASK_SUFFIXES)
                if not _is_queue_config(name):  # the queue configuration is not a task
                    names.add(name)
            elif not segments[-1].endswith(SIDECAR_SUFFIXES + EDITOR_SUFFIXES):
                return None  # a folder (or anything else) may hold or have held specs
        return names

    def _scan_names(self, names: set[str]) -> dict[str, SpecEntry] | None:
        """Re-read only `names` (and those still settling or briefly missing); None when a
        full walk is needed after all (a symlink appeared)."""
        names = names | set(self._missing_since)
        names |= {n for n, (key, _) in self._seen.items() if self._reported_keys.get(n) != key}
        self._looked_at = names  # what this scan may change; nothing else is touched
        if not names:
            # Nothing to re-read (a pass the timer woke): no copies of the kept maps, which
            # cost ~0.1 ms each at 10,000 tasks. _elements only reads what it is handed.
            return self._entries
        now = self._clock()
        entries = dict(self._entries)
        parsed = dict(self._parsed)
        for name in names:
            files: list[tuple[str, str, Callable[[], os.stat_result]]] = []
            unreadable = False
            for suffix in TASK_SUFFIXES:
                rel = name + suffix
                path = os.path.join(self._top, rel)
                parsed.pop(rel, None)
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    continue
                except OSError:
                    unreadable = True
                    continue
                if stat.S_ISLNK(st.st_mode):
                    return None  # symlinks follow the walk's rules
                if stat.S_ISREG(st.st_mode):
                    files.append((rel, path, functools.partial(os.stat, path)))
            old = entries.pop(name, None)
            if files:
                self._missing_since.pop(name, None)
                unreadable = not self._take(name, files, now, entries, parsed) or unreadable
            else:
                self._seen.pop(name, None)
            if name in entries or old is None:
                continue
            if unreadable:
                entries[name] = old
            elif self.settle_seconds > 0:
                since = self._missing_since.setdefault(name, now)
                if now - since < self.settle_seconds:
                    entries[name] = old
            if name not in entries:
                self._missing_since.pop(name, None)
                self._reported_keys.pop(name, None)
                self._last_valid.pop(name, None)
                self._basis.pop(name, None)
        self._parsed = parsed
        self._entries = entries
        return entries  # _elements only reads it: no copy
