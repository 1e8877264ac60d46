"""The store's array sidecars: one sidecar per array holding its elements' statuses, the
expansion of array entries into element entries, and the batching of their writes (a
TaskStore mixin).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from specs.folder.atomic import sync_folders, write_atomic
from specs.folder.paths import StatKey, _check_relative, _read_regular, _stat_key
from specs.task import arrays, arraystatus
from specs.task.status import TaskStatus
from specs.yamlio.parse import MAX_FILE_BYTES

if TYPE_CHECKING:
    from specs.folder.store import SpecEntry

log = logging.getLogger("rayqueue.store")


@dataclass
class _ArraySidecar:
    """One array's sidecar: its elements' statuses (by index) and what is on disk."""

    key: StatKey | None
    data: bytes
    elements: dict[int, TaskStatus]
    generations: dict[int, int]
    dirty: bool = False
    durable: bool = False


class _ArraySidecars:
    """TaskStore's array elements and array sidecars."""

    if TYPE_CHECKING:
        root: Path
        status_dir: Path | None
        _lock: threading.Lock
        _generations: Iterator[int]
        _expanded: dict[str, tuple[int, dict[str, SpecEntry]]]
        _arrays: dict[str, _ArraySidecar]
        _status_touched: set[str]
        _shown: dict[str, SpecEntry] | None
        _batching: int
        _unsynced_folders: set[str]

        def _warn_once(self, path: str, message: str) -> None: ...

    def _elements(
        self, entries: dict[str, SpecEntry], looked_at: set[str] | None = None
    ) -> tuple[dict[str, SpecEntry], set[str] | None]:
        """`entries` with every array replaced by its elements (cached per generation), and
        the names that may differ from the last call's. `looked_at`: the only names whose
        entry may have changed since the last call; None: any may (all are expanded anew)."""
        shown = self._shown
        if looked_at is None or shown is None:
            out: dict[str, SpecEntry] = {}
            kept: dict[str, tuple[int, dict[str, SpecEntry]]] = {}
            for name, entry in entries.items():
                source = entry.task or entry.last_valid
                if source is None or source.spec.array is None:
                    out[name] = entry
                    continue
                cached = self._expanded.get(name)
                if cached is None or cached[0] != entry.generation:
                    cached = (entry.generation, _element_entries(entry))
                kept[name] = cached
                out.update(cached[1])
            self._expanded = kept
            self._shown = out
            return dict(out), None
        changes: set[str] = set()
        for name in looked_at:
            was = self._expanded.pop(name, None)
            for gone in was[1] if was is not None else (name,):
                if shown.pop(gone, None) is not None:
                    changes.add(gone)
            now = entries.get(name)
            if now is None:
                continue
            source = now.task or now.last_valid
            if source is None or source.spec.array is None:
                shown[name] = now
                changes.add(name)
                continue
            if was is None or was[0] != now.generation:
                was = (now.generation, _element_entries(now))
            self._expanded[name] = was
            shown.update(was[1])
            changes.update(was[1])
        return dict(shown), changes

    def read_array(self, array: str) -> dict[int, TaskStatus]:
        """The element statuses of one array, by index: what this store holds, else its
        sidecar on disk (empty when there is none or it is unreadable)."""
        with self._lock:
            held = self._arrays.get(array)
            if held is not None:
                return dict(held.elements)
        try:
            data = _read_regular(self._array_path(array), limit=16 * MAX_FILE_BYTES)
        except OSError:
            return {}
        if data is None:
            return {}
        try:
            return arraystatus.load(data)[1]
        except arraystatus.ArrayStatusError:
            return {}

    def _load_array(self, array: str, entry: os.DirEntry[str]) -> _ArraySidecar | None:
        try:
            st = entry.stat()
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            held = self._arrays.get(array)
            if held is not None and held.key == key:
                return held
            data = _read_regular(entry.path)
        except OSError as exc:
            self._warn_once(entry.path, f"cannot read sidecar: {exc}")
            return self._arrays.get(array)
        if data is None:
            return None
        try:
            _, elements = arraystatus.load(data)
        except arraystatus.ArrayStatusError as exc:
            log.warning("ignoring unreadable array sidecar %s: %s", entry.path, exc)
            return None
        generation = next(self._generations)
        return _ArraySidecar(key, data, elements, dict.fromkeys(elements, generation))

    @contextlib.contextmanager
    def batch(self) -> Iterator[set[str]]:
        """Statuses of array elements written inside are written once per array at the end
        (fsynced if any of them asked to be): a pass changes many elements at once. The set
        yielded holds, after the block, the elements whose sidecar could not be written."""
        failed: set[str] = set()
        with self._lock:
            self._batching += 1
        try:
            yield failed
        finally:
            with self._lock:
                self._batching -= 1
                if not self._batching:
                    failed |= self._write_arrays()
                    sync_folders(self._unsynced_folders)
                    self._unsynced_folders = set()

    def _array_status(
        self, array: str, index: int, status: TaskStatus | None, durable: bool
    ) -> bool:
        """Set (or with None forget) one element's status; write now unless in a batch."""
        held = self._arrays.setdefault(array, _ArraySidecar(None, b"", {}, {}))
        self._status_touched.add(arrays.element_name(array, index))
        if status is None:
            if held.elements.pop(index, None) is None:
                return False
            held.generations.pop(index, None)
        else:
            held.elements[index] = status
            held.generations[index] = next(self._generations)
        held.dirty = True
        held.durable = held.durable or durable
        if not self._batching and self._write_arrays():
            raise OSError(f"cannot write the status of array {array}")
        return True

    def _write_arrays(self) -> set[str]:
        """Write every changed array sidecar; the elements of those that failed (kept dirty)."""
        failed: set[str] = set()
        for array, held in list(self._arrays.items()):
            if not held.dirty:
                continue
            path = self._array_path(array)
            try:
                if not held.elements:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                    del self._arrays[array]
                    continue
                data = arraystatus.dump(array, held.elements)
                if data != held.data:
                    write_atomic(path, data, durable=held.durable)
                    held.key, held.data = _stat_key(path), data
            except OSError as exc:
                log.error("cannot write the status of array %s: %s", array, exc)
                failed |= {arrays.element_name(array, i) for i in held.elements}
                continue
            held.dirty = held.durable = False
        return failed

    def _array_path(self, array: str) -> Path:
        _check_relative(array)
        base = self.root if self.status_dir is None else self.status_dir
        return base / f"{array}{arraystatus.SUFFIX}"


def _element_entries(entry: SpecEntry) -> dict[str, SpecEntry]:
    """The entries of an array's elements: each with its own task (or, while the file is
    invalid, its error and its last valid element)."""
    tasks = arrays.expand(entry.name, entry.task) if entry.task is not None else {}
    last = entry.last_valid
    if last is entry.task:
        lasts = tasks
    else:
        lasts = arrays.expand(entry.name, last) if last is not None and last.spec.array else {}
    names = tasks or lasts
    return {
        name: replace(entry, name=name, task=tasks.get(name), last_valid=lasts.get(name))
        for name in names
    }
