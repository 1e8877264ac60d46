"""The store's status sidecars: where they live, reading them all (cached by stat), writing,
deferring and flushing, deleting (a TaskStore mixin). The per-file read and write
(`_load_sidecar`, `_write_sidecar`) stay in specs/folder/store.py, where tests patch their helpers.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specs.folder.arrayfiles import _ArraySidecar, _ArraySidecars
from specs.folder.listing import _FolderWalk
from specs.task import arrays, arraystatus

if TYPE_CHECKING:
    from specs.folder.store import SpecEntry
from specs.folder.paths import (
    STATUS_SUFFIX,
    FolderUnavailable,
    PackedKey,
    _check_relative,
    _prune_empty_parents,
    _under_any,
    _Unreadable,
)
from specs.queues.config import STATUS_FILE
from specs.task.status import TaskStatus
from specs.yamlio.parse import dump_status


@dataclass(frozen=True, slots=True)
class _Sidecar:
    key: PackedKey
    status: TaskStatus | None  # None: unparsable, counts as absent
    digest: bytes  # of the bytes on disk, to skip identical rewrites (not the bytes: memory)
    generation: int  # of `status`: kept while it is the status held


@dataclass(frozen=True, slots=True)
class _Deferred:
    status: TaskStatus
    since: float  # deferred since (the store's clock)
    generation: int


class _StatusSidecars(_ArraySidecars, _FolderWalk):
    """TaskStore's status sidecars."""

    if TYPE_CHECKING:
        _clock: Callable[[], float]
        _statuses_read: bool
        _sidecars: dict[str, _Sidecar]
        _entries: dict[str, SpecEntry]
        _pending: dict[str, _Deferred]
        # The statuses (and generations) the last read handed out, and the names changed
        # since by this store (None: build anew at the next read).
        _status_view: tuple[dict[str, TaskStatus], dict[str, int]] | None
        _status_touched: set[str]
        _status_rebuilt: bool  # the view was built anew since read_status_changes last ran
        _fresh_order: list[str] | None

        def _load_sidecar(
            self, name: str, rel: str, entry: os.DirEntry[str]
        ) -> _Sidecar | None: ...

        def _write_sidecar(
            self,
            name: str,
            path: str | Path,
            status: TaskStatus,
            data: bytes,
            durable: bool,
            generation: int,
        ) -> bool: ...

    def status_path(self, name: str) -> Path:
        """Where the sidecar of `name` lives. Names from a scan are trusted; only the shape of
        the path is checked, since scanned names need not pass validate_name."""
        _check_relative(name)
        base = self.root if self.status_dir is None else self.status_dir
        return base / f"{name}{STATUS_SUFFIX}"

    def read_statuses(self, *, cached: bool = False) -> dict[str, TaskStatus]:
        """Every readable sidecar by task name, including orphans whose spec is gone.

        cached: what the last read found, updated by this store's own writes, without a walk.
        Only this process writes sidecars (the lock sees to it), so that record is exact
        between full reads; the loop still does a full read at every periodic rescan.
        """
        return self.read_statuses_versioned(cached=cached)[0]

    def read_statuses_versioned(
        self, *, cached: bool = False
    ) -> tuple[dict[str, TaskStatus], dict[str, int]]:
        """read_statuses, and the generation of each status it hands out."""
        statuses, generations, _ = self._read_view(cached, consume=False)
        return statuses, generations

    def read_status_changes(
        self, *, cached: bool = False
    ) -> tuple[dict[str, TaskStatus], dict[str, int], set[str] | None]:
        """read_statuses_versioned, and the names whose status may differ from what the last
        call of this method handed out (None: any may). For the one reader that follows
        every change (the loop); others use read_statuses. A cached read costs what changed:
        the mapping handed out is kept, updated by this store's writes, defers and deletes."""
        return self._read_view(cached, consume=True)

    def _read_view(
        self, cached: bool, *, consume: bool
    ) -> tuple[dict[str, TaskStatus], dict[str, int], set[str] | None]:
        with self._lock:
            if not (cached and self._statuses_read):
                self._statuses_read = True
                self._status_view = None
                sidecars = self._read_sidecars()
                if sidecars is None:
                    self._sidecars = {}  # no status folder yet: nothing written so far
                    self._status_rebuilt = True
                    self._fresh_order = None
                    return {}, {}, None
                self._sidecars = sidecars
                self._fresh_order = None  # which records are new follows _sidecars: sort again
            view = self._status_view
            if view is None:
                view = self._status_view = self._all_statuses()
                self._status_touched = set()
                self._status_rebuilt = True
            statuses, generations = view
            # Applied again if another reader applied them already: the same result.
            for name in self._status_touched:
                self._view_one(name, statuses, generations)
            changes: set[str] | None = None
            if consume:
                changes = None if self._status_rebuilt else self._status_touched
                self._status_touched, self._status_rebuilt = set(), False
            return dict(statuses), dict(generations), changes

    def _view_one(
        self, name: str, statuses: dict[str, TaskStatus], generations: dict[str, int]
    ) -> None:
        """Set `name` in a view as _all_statuses would (what is deferred first, then an
        array's element, then the sidecar)."""
        deferred = self._pending.get(name)
        if deferred is not None:
            statuses[name], generations[name] = deferred.status, deferred.generation
            return
        element = arrays.split(name)
        if element is not None:
            held = self._arrays.get(element[0])
            status = held.elements.get(element[1]) if held is not None else None
            generation = held.generations.get(element[1], 0) if held is not None else 0
        else:
            sidecar = self._sidecars.get(name)
            status = sidecar.status if sidecar is not None else None
            generation = sidecar.generation if sidecar is not None else 0
        if status is None:
            statuses.pop(name, None)
            generations.pop(name, None)
        else:
            statuses[name], generations[name] = status, generation

    def _all_statuses(self) -> tuple[dict[str, TaskStatus], dict[str, int]]:
        """Every status held: the sidecars read, array elements, what is deferred."""
        statuses: dict[str, TaskStatus] = {}
        generations: dict[str, int] = {}
        for name, sidecar in self._sidecars.items():
            if sidecar.status is not None:  # None: unparsable, counts as absent
                statuses[name], generations[name] = sidecar.status, sidecar.generation
        for array, held in self._arrays.items():
            for index, status in held.elements.items():
                element = arrays.element_name(array, index)
                statuses[element] = status
                generations[element] = held.generations.get(index, 0)
        # What waits to be written is newer, and only this process writes sidecars.
        for name, deferred in self._pending.items():
            statuses[name], generations[name] = deferred.status, deferred.generation
        return statuses, generations

    def _read_sidecars(self) -> dict[str, _Sidecar] | None:
        """Every sidecar on disk; None when the status folder does not exist yet."""
        try:
            top = self._real_dir(self.root if self.status_dir is None else self.status_dir)
        except FolderUnavailable:
            if self.status_dir is None or os.path.lexists(self.status_dir):
                raise
            return None
        walk = self._walk(top, lambda n: n.endswith(STATUS_SUFFIX), None)
        sidecars: dict[str, _Sidecar] = {}
        found: dict[str, _ArraySidecar] = {}
        for rel, entry in walk.files:
            name = rel.removesuffix(STATUS_SUFFIX)
            if (spec := self._entries.get(name)) is not None:
                name = spec.name  # the spec's string: one per task
            if rel == STATUS_FILE or rel in walk.crossings:
                continue  # the queues' status; or another team's, reached by a symlink
            if rel.endswith(arraystatus.SUFFIX):
                array = rel.removesuffix(arraystatus.SUFFIX)
                held = self._load_array(array, entry)
                if held is not None:
                    found[array] = held
                continue
            try:
                sidecar = self._load_sidecar(name, rel, entry)
            except _Unreadable:
                walk.unreadable.append(rel)
                continue
            if sidecar is not None:
                sidecars[name] = sidecar
        for name, old in self._sidecars.items():
            if name not in sidecars and _under_any(name + STATUS_SUFFIX, walk.unreadable):
                sidecars[name] = old
        # What this process holds and has not written yet is newer than the disk.
        found.update({a: held for a, held in self._arrays.items() if held.dirty})
        self._arrays = found
        return sidecars

    def write_status(self, name: str, status: TaskStatus, *, durable: bool = True) -> bool:
        """Write the sidecar atomically; False (and no write) if the bytes are unchanged.

        durable: fsynced, so it survives an OS crash (a write-ahead record: see
        reconciler/shell/loop/writes.py). Either way it replaces a status waiting in defer_status.
        """
        element = arrays.split(name)
        if element is not None:
            with self._lock:
                return self._array_status(*element, status, durable)
        path = self.status_path(name)
        data = dump_status(status).encode()
        with self._lock:
            self._pending.pop(name, None)
            self._status_touched.add(name)
            generation = next(self._generations)
            return self._write_sidecar(name, path, status, data, durable, generation)

    def defer_status(self, name: str, status: TaskStatus) -> None:
        """Keep `status` to be written by a later flush_statuses; read_statuses returns it
        meanwhile. Only for what the next process could derive again: it is lost with us."""
        _check_relative(name)
        element = arrays.split(name)
        if element is not None:  # an element's derived fields are never written anyway
            with self._lock:
                self._array_status(*element, status, False)
            return
        with self._lock:
            self._status_touched.add(name)
            held = self._pending.get(name)
            since = held.since if held is not None else self._clock()
            # Keeps its place when held already: _pending stays in the order of `since`.
            self._pending[name] = _Deferred(status, since, next(self._generations))
            self._fresh_order = None

    def flush_statuses(self, budget: int, min_age: float) -> int:
        """Write up to `budget` deferred statuses, without fsync: first those with no sidecar
        yet (front of the queue first), then those deferred at least `min_age` seconds ago
        (the longest waiting first). Returns how many were written; a failed write stays
        deferred and is logged once.

        A start defers a record for every task and then drains them over many passes: the
        order of the new records is sorted once per change (not per pass), and the waiting
        ones are taken in the order they were deferred, which is the order of `since`.
        """
        with self._lock:
            if not self._pending:
                return 0
            now = self._clock()
            if self._fresh_order is None:
                fresh: list[tuple[int, str]] = []
                for name, deferred in self._pending.items():
                    if name not in self._sidecars:
                        position = deferred.status.status.queue_position
                        fresh.append((position if position is not None else 1 << 62, name))
                fresh.sort(reverse=True)  # popped from the end: the front of the queue first
                self._fresh_order = [n for _, n in fresh]
            order = self._fresh_order
            chosen: list[str] = []
            while order and len(chosen) < budget:
                name = order.pop()
                if name in self._pending and name not in self._sidecars:
                    chosen.append(name)
            if len(chosen) < budget:
                for name, deferred in self._pending.items():
                    if name not in self._sidecars:
                        continue  # a new record: in the order above
                    if now - deferred.since < min_age:
                        break  # deferred in order of `since`: the rest are younger still
                    chosen.append(name)
                    if len(chosen) >= budget:
                        break
            base = os.fspath(self.root if self.status_dir is None else self.status_dir)
            written = 0
            for name in chosen:
                deferred = self._pending[name]
                status = deferred.status  # written as it was handed out: its generation stays
                path = os.path.join(base, name + STATUS_SUFFIX)  # no pathlib: 50,000 of them
                try:
                    data = dump_status(status).encode()
                    self._write_sidecar(name, path, status, data, False, deferred.generation)
                except OSError as exc:
                    self._warn_once(str(path), f"cannot write: {exc.strerror}")
                    if name not in self._sidecars:
                        order.insert(0, name)  # tried again after the others
                    continue
                del self._pending[name]
                written += 1
            return written

    @property
    def deferred_statuses(self) -> int:
        """How many statuses wait for flush_statuses."""
        return len(self._pending)

    def delete_status(self, name: str) -> None:
        """Remove the sidecar; a missing one is fine."""
        element = arrays.split(name)
        if element is not None:
            with self._lock:
                self._array_status(*element, None, False)
            return
        path = self.status_path(name)
        with self._lock:
            self._status_touched.add(name)
            self._sidecars.pop(name, None)
            self._pending.pop(name, None)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            if self.status_dir is not None:
                # The parallel tree is ours: prune folders it no longer needs.
                _prune_empty_parents(path.parent, self.status_dir)
