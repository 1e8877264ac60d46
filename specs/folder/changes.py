"""The store's scan of its spec files: a full walk of the folder, or a re-read of only the
names file events point at; the parse cache by stat key; the settle wait for files still
being written; and what the loop asks of the kept entries between scans (`still`).
"""

from __future__ import annotations

import functools
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from specs.folder.listing import FolderLister, Walk
from specs.folder.paths import (
    EDITOR_SUFFIXES,
    SIDECAR_SUFFIXES,
    TASK_SUFFIXES,
    FolderSettling,
    PackedKey,
    StatKey,
    Unreadable,
    dir_id,
    inside,
    is_queue_config,
    is_spec_file,
    pack_key,
    pack_stat,
    packed_mtime_ns,
    strip_suffix,
    under_any,
)
from specs.folder.specfiles import CachedRead, SpecFiles
from specs.task.errors import SpecError
from specs.task.inputs import TaskInput
from specs.task.quantity import plural

_WHOLE_KEPT = 10_000  # stat keys of finished files remembered (mark_whole)

# The files that may define one task name: (relative path, path, how to stat it).
_Files = list[tuple[str, str, Callable[[], os.stat_result]]]


class ChangeScanner:
    """The spec entries of one store, kept between scans and brought up to date by each.
    Not thread-safe: the store calls it under its lock."""

    def __init__(
        self,
        root: Path,
        status_dir: Path | None,
        *,
        settle_seconds: float,
        clock: Callable[[], float],
        lister: FolderLister,
        files: SpecFiles,
        generations: Iterator[int],
    ) -> None:
        self._root = root
        self._status_dir = status_dir
        # A file that changed, appeared or vanished since the last scan is reported as it was
        # until it has stayed so for settle_seconds: a half-written file or a git checkout
        # midway must never read as an edit or a deletion. 0 reports at once.
        self.settle_seconds = settle_seconds
        self._clock = clock
        self._lister = lister
        self._files = files
        self._generations = generations
        self.walked = False  # a full walk has succeeded
        self._top = ""  # the real root of the last full walk
        self.links = False  # that walk met a symlink
        self._reported_keys: dict[str, PackedKey] = {}  # stat key behind each reported entry
        self._seen: dict[str, tuple[PackedKey, float]] = {}  # key on disk, since when
        self._missing_since: dict[str, float] = {}
        # By relative path as walked from _parsed_top (not by the whole path: a string per
        # task); a walk from another real root (git-sync swapped the link) starts afresh.
        self.parsed: dict[str, CachedRead] = {}
        self._parsed_top = ""
        self.entries: dict[str, TaskInput] = {}
        # By name: the last good parse of the name (its task and that read's generation).
        self._last_valid: dict[str, CachedRead] = {}
        # By name: what the reported entry was made of (a tuple, or for a valid file alone
        # its parse, no tuple more per task); an entry made of the same is kept.
        self._basis: dict[str, object] = {}
        self._held: list[str] = []  # names the first scan found still being written
        # The names the last scan of events looked at: what it may have changed.
        self.looked_at: set[str] = set()
        # Stat keys of files their writer is known to have finished (mark_whole): no settle
        # wait for them. Insertion-ordered, and only the latest _WHOLE_KEPT are kept.
        self._whole: dict[PackedKey, None] = {}

    def mark_whole(self, keys: Iterable[StatKey]) -> None:
        """Files with these stat keys are complete: read them without a settle wait."""
        for key in keys:
            self._whole[pack_key(key)] = None
        while len(self._whole) > _WHOLE_KEPT:
            del self._whole[next(iter(self._whole))]

    def still(self) -> bool:
        """Whether a scan that events name nothing for would read nothing either (see
        TaskStore.still)."""
        if not self.walked or self.links or self._missing_since or self._held:
            return False
        if any(self._reported_keys.get(n) != key for n, (key, _) in self._seen.items()):
            return False
        return os.path.realpath(self._root) == self._top

    # --- a scan of the names events point at -----------------------------------------------

    def names_of(self, changed: Iterable[str]) -> set[str] | None:
        """Task names behind the changed paths; None if only a full walk can tell."""
        if not self.walked or self.links:
            return None
        top = os.path.realpath(self._root)
        if top != self._top:
            return None  # git-sync swapped the root link: a new tree
        bases = (os.path.abspath(self._root), top)
        status = os.path.realpath(self._status_dir) if self._status_dir is not None else None
        names: set[str] = set()
        for path in changed:
            if status is not None and inside(path, status):
                continue
            rel = next((path[len(b) + 1 :] for b in bases if path.startswith(b + os.sep)), None)
            if rel is None:
                return None
            segments = rel.split(os.sep)
            if any(s.startswith(".") for s in segments):
                continue  # hidden: temp files of atomic writes, .git; a walk skips them too
            if is_spec_file(segments[-1]):
                name = strip_suffix("/".join(segments), TASK_SUFFIXES)
                if not is_queue_config(name):  # the queue configuration is not a task
                    names.add(name)
            elif not segments[-1].endswith(SIDECAR_SUFFIXES + EDITOR_SUFFIXES):
                return None  # a folder (or anything else) may hold or have held specs
        return names

    def scan_names(self, names: set[str]) -> dict[str, TaskInput] | None:
        """Re-read only `names` (and those still settling or briefly missing); None when a
        full walk is needed after all (a symlink appeared)."""
        names = names | set(self._missing_since)
        names |= {n for n, (key, _) in self._seen.items() if self._reported_keys.get(n) != key}
        self.looked_at = names  # what this scan may change; nothing else is touched
        if not names:
            # Nothing to re-read (a pass the timer woke): no copies of the kept maps. The
            # caller only reads what it is handed.
            return self.entries
        now = self._clock()
        entries = dict(self.entries)
        parsed = dict(self.parsed)
        for name in names:
            files: _Files = []
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
        self.parsed = parsed
        self.entries = entries
        return entries  # the caller only reads it: no copy

    # --- a full walk -----------------------------------------------------------------------

    def scan_all(self) -> dict[str, TaskInput]:
        """Walk the whole folder; every task's entry (a copy the caller owns)."""
        top = self._lister.real_dir(self._root)
        if top != self._parsed_top:
            self.parsed, self._parsed_top = {}, top
        skip = dir_id(self._status_dir) if self._status_dir is not None else None
        walk = self._lister.walk(top, is_spec_file, skip)
        by_name, crossed = _by_name(walk)
        parsed: dict[str, CachedRead] = {}
        entries: dict[str, TaskInput] = {}
        unreadable = list(walk.unreadable)
        now = self._clock()
        self._held = []
        for name, rel in crossed.items():
            entries[name] = self._crossed(name, rel, walk.crossings[rel])
            by_name.pop(name, None)
        for name, files in by_name.items():
            if not self._take(name, files, now, entries, parsed):
                unreadable.append(files[0][0])
        if self._held:
            # With no earlier scan there is no old content to report meanwhile, and leaving
            # the name out would read as a deletion: so the whole scan waits (a second at most
            # per unchanged file). The parses are kept.
            self.parsed = parsed
            raise self._settling_first()
        self._keep_missing(entries, unreadable, now)
        self._missing_since = {
            n: t for n, t in self._missing_since.items() if n in entries and n not in by_name
        }
        self._seen = {n: v for n, v in self._seen.items() if n in by_name}
        self._reported_keys = {n: k for n, k in self._reported_keys.items() if n in entries}
        self.walked = True
        self._top, self.links = top, walk.links
        self.parsed = parsed
        self.entries = entries
        self._last_valid = {n: t for n, t in self._last_valid.items() if n in entries}
        self._basis = {n: b for n, b in self._basis.items() if n in entries}
        return dict(entries)

    def _crossed(self, name: str, rel: str, message: str) -> TaskInput:
        """The entry of a file reached through a symlink from another team's folder: never
        read, Invalid with `message`."""
        last = self._last_valid.get(name)
        basis = ("crossed", rel, message, last.read.generation if last is not None else None)
        error = SpecError.unplaced(message, rel)
        last_task = last.read.task if last is not None else None
        root = self._root
        return self._stamped(
            name,
            basis,
            lambda g: TaskInput(name, None, error, last_task, base=root, rel=rel, generation=g),
        )

    def _settling_first(self) -> FolderSettling:
        held = sorted(self._held)
        shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        return FolderSettling(
            f"{plural(len(held), 'spec file')} written less than {self.settle_seconds:g} s "
            f"before the first scan ({shown}); waiting for them to settle"
        )

    def _keep_missing(
        self, entries: dict[str, TaskInput], unreadable: list[str], now: float
    ) -> None:
        """Put back in `entries` what a walk did not find but must still report."""
        for name, old in self.entries.items():
            if name in entries:
                continue
            # An unreadable file or folder keeps its last entry: a permissions hiccup must
            # not look like a deletion, which would stop running jobs.
            if under_any(old.rel, unreadable):
                entries[name] = old
            # Nor may a file that is gone for a moment (git unlinks and rewrites on checkout).
            elif self.settle_seconds > 0:
                since = self._missing_since.setdefault(name, now)
                if now - since < self.settle_seconds:
                    entries[name] = old

    # --- one task name ---------------------------------------------------------------------

    def _take(
        self,
        name: str,
        files: _Files,
        now: float,
        entries: dict[str, TaskInput],
        parsed: dict[str, CachedRead],
    ) -> bool:
        """Load the files defining `name` into `entries` (the old entry while it settles);
        False if unreadable. A file gone since the listing leaves `name` out."""
        old = self.entries.get(name)
        if old is not None:
            name = old.name  # one string per name kept, not one more per walk
        if len(files) > 1:
            files.sort(key=lambda f: f[0].endswith(".yml"))  # .yaml wins
        rel, path, stat_of = files[0]
        if old is not None and old.rel == rel:
            rel = old.rel  # the same for the parse cache's key
        try:
            result = self._load(rel, path, stat_of, name)
        except Unreadable:
            return False
        if result is None:  # gone since the listing
            return True
        parsed[rel] = result
        if self._settling(name, result, now):
            old = self.entries.get(name)
            if old is not None:
                entries[name] = old  # as it was; a new file waits to be reported
            return True
        entries[name] = self._entry(name, rel, result, [f[0] for f in files[1:]])
        self._reported_keys[name] = result.key
        return True

    def _load(
        self, rel: str, path: str, stat_of: Callable[[], os.stat_result], name: str
    ) -> CachedRead | None:
        """Parse a spec file, or reuse the cached parse (and its generation) if its stat is
        unchanged."""
        try:
            st = stat_of()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._lister.warn_once(path, f"cannot read: {exc.strerror}")
            raise Unreadable from exc
        key = pack_stat(st)
        cached = self.parsed.get(rel)
        if cached is not None and cached.key == key:
            return cached
        return self._files.parse(rel, path, st, key, name)

    def _settling(self, name: str, parsed: CachedRead, now: float) -> bool:
        """Whether the file behind `name` changed too recently to be believed yet."""
        key = parsed.key
        if self.settle_seconds <= 0 or parsed.whole or key in self._whole:
            return False
        if not self.walked:
            # Files older than the settle time were complete when serve started; a younger
            # one may be mid-write (written while serve was down, or just as it started).
            young = time.time_ns() - packed_mtime_ns(key) < self.settle_seconds * 1e9
            if young and self._unsettled(name, key, now):
                self._held.append(name)
                return True
            return False
        if self._reported_keys.get(name) == key:
            return False
        return self._unsettled(name, key, now)

    def _unsettled(self, name: str, key: PackedKey, now: float) -> bool:
        """Whether `key` is new for `name` or has not stayed so for settle_seconds (on our
        clock: a modification time in the future must not hold a file forever)."""
        seen = self._seen.get(name)
        if seen is None or seen[0] != key:
            self._seen[name] = (key, now)
            return True
        return now - seen[1] < self.settle_seconds

    def _entry(self, name: str, rel: str, result: CachedRead, others: list[str]) -> TaskInput:
        read = result.read
        if read.task is not None and not others:
            # Valid, alone: the read itself is the entry, and says what it is made of.
            self._last_valid[name] = self._basis[name] = result
            return read
        error = read.error
        if others:
            # Names are the keys, so only one entry can stand; it carries the conflict.
            files = " and ".join([rel, *others])
            error = SpecError.unplaced(f"both {files} define task {name}", rel)
        last = self._last_valid.get(name)
        last_generation = last.read.generation if last is not None else None
        basis = (read.generation, tuple(others), last_generation, rel)
        last_task = last.read.task if last is not None else None
        return self._stamped(
            name,
            basis,
            lambda g: replace(
                read, task=None, error=error, last_valid=last_task, spec_hash=None, generation=g
            ),
        )

    def _stamped(self, name: str, basis: object, build: Callable[[int], TaskInput]) -> TaskInput:
        """The entry `build` makes with a new generation, or the entry last reported for
        `name` (generation and all) when it was made of the same reads (`basis`): then nothing
        is built (a full walk of an unchanged folder builds no entries)."""
        old = self.entries.get(name)
        if old is not None and self._basis.get(name) == basis:
            return old
        self._basis[name] = basis
        return build(next(self._generations))


def _by_name(walk: Walk) -> tuple[dict[str, _Files], dict[str, str]]:
    """The spec files a walk found, by task name; and the names reached through a symlink
    from another team's folder, with the file of each (never read)."""
    by_name: dict[str, _Files] = {}
    crossed: dict[str, str] = {}
    for rel, entry in walk.files:
        name = strip_suffix(rel, TASK_SUFFIXES)
        if is_queue_config(name):
            continue  # the queue configuration, read by the loop, not a task
        if rel in walk.crossings:
            crossed.setdefault(name, rel)
            continue
        files = by_name.get(name)
        if files is None:
            by_name[name] = [(rel, entry.path, entry.stat)]
        else:
            files.append((rel, entry.path, entry.stat))
    return by_name, crossed
