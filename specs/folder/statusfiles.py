"""The store's status sidecars: where they live, reading them all (cached by stat), writing
(no identical rewrite), deferring and flushing, deleting, and the view of every status held
that readers are handed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from specs.folder.arrayfiles import ArrayFiles, ArraySidecar
from specs.folder.atomic import sync_folders
from specs.folder.listing import FolderLister
from specs.folder.paths import (
    STATUS_SUFFIX,
    FolderUnavailable,
    PackedKey,
    ReadFile,
    StatKey,
    Unreadable,
    check_relative,
    pack_key,
    pack_stat,
    prune_empty_parents,
    sidecar_digest,
    under_any,
)
from specs.queues.config import STATUS_FILE
from specs.task import arrays, arraystatus
from specs.task.inputs import TaskInput
from specs.task.status import TaskStatus
from specs.yamlio.parse import MAX_FILE_BYTES, SpecParseError, dump_status

log = logging.getLogger("rayqueue.store")

_SIDECAR_MODE = 0o644  # a new sidecar's: readable by the users and tools that watch the queue


class ParseStatus(Protocol):
    """How a sidecar's bytes become a TaskStatus: specs.yamlio.parse.parse_status, or a test's
    own."""

    def __call__(self, text: str | bytes, *, file: str = ...) -> TaskStatus: ...


class WriteFile(Protocol):
    """How a sidecar is written: specs.folder.atomic.replace_file, or a test's own; returns
    the stat key of the file written."""

    def __call__(
        self,
        path: str | Path,
        data: bytes,
        *,
        durable: bool,
        mode: int = ...,
        sync_folder: bool = ...,
    ) -> StatKey: ...


# The statuses a read hands out, and the generation of each.
StatusView = tuple[dict[str, TaskStatus], dict[str, int]]


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


class StatusFiles:
    """The status sidecars of one store, array sidecars included (through `arrays`). Not
    thread-safe: the store calls it under its lock."""

    def __init__(
        self,
        root: Path,
        status_dir: Path | None,
        *,
        lister: FolderLister,
        arrays: ArrayFiles,
        generations: Iterator[int],
        clock: Callable[[], float],
        read_file: ReadFile,
        write_file: WriteFile,
        parse_status: ParseStatus,
    ) -> None:
        self._status_dir = status_dir
        self._sidecar_root = root if status_dir is None else status_dir
        self._lister = lister
        self._arrays = arrays
        self._generations = generations
        self._clock = clock
        self._read_file = read_file
        self._write_file = write_file
        self._parse_status = parse_status
        self.sidecars: dict[str, _Sidecar] = {}  # by task name
        # Statuses handed to defer and not yet on disk.
        self._pending: dict[str, _Deferred] = {}
        # The new records among them, the last to write first; None: sort again.
        self._fresh_order: list[str] | None = None
        self._read_once = False
        # The statuses (and generations) the last read handed out, and the names changed
        # since by this store (None: build anew at the next read).
        self._view: StatusView | None = None
        self._touched: set[str] = set()
        self._rebuilt = True  # the view was built anew since read_view(consume=True) last ran
        # Open batches (see TaskStore.batch), and the folders of their durable writes: each
        # fsynced once when the last batch ends.
        self._batching = 0
        self._unsynced_folders: set[str] = set()

    def path(self, name: str) -> Path:
        """Where the sidecar of `name` lives. Names from a scan are trusted; only the shape of
        the path is checked, since scanned names need not pass validate_name."""
        check_relative(name)
        return self._sidecar_root / f"{name}{STATUS_SUFFIX}"

    @property
    def deferred(self) -> int:
        """How many statuses wait for flush."""
        return len(self._pending)

    # --- reading ---------------------------------------------------------------------------

    def read_view(
        self, cached: bool, *, consume: bool, entries: Mapping[str, TaskInput]
    ) -> tuple[dict[str, TaskStatus], dict[str, int], set[str] | None]:
        """Every status held (read from disk unless `cached` and read before), and with
        `consume` the names changed since the last consuming read (None: any may).
        `entries`: the scan's, whose name strings the sidecars' names share."""
        if not (cached and self._read_once):
            self._read_once = True
            self._view = None
            sidecars = self._read_sidecars(entries)
            if sidecars is None:
                self.sidecars = {}  # no status folder yet: nothing written so far
                self._rebuilt = True
                self._fresh_order = None
                return {}, {}, None
            self.sidecars = sidecars
            self._fresh_order = None  # which records are new follows sidecars: sort again
        view = self._view
        if view is None:
            view = self._view = self.all_statuses()
            self._touched = set()
            self._rebuilt = True
        statuses, generations = view
        # Applied again if another reader applied them already: the same result.
        held_arrays = self._arrays.held
        for name in self._touched:
            self._view_one(name, statuses, generations, held_arrays)
        changes: set[str] | None = None
        if consume:
            changes = None if self._rebuilt else self._touched
            self._touched, self._rebuilt = set(), False
        return dict(statuses), dict(generations), changes

    def _view_one(
        self,
        name: str,
        statuses: dict[str, TaskStatus],
        generations: dict[str, int],
        held_arrays: dict[str, ArraySidecar],
    ) -> None:
        """Set `name` in a view as all_statuses would (what is deferred first, then an
        array's element, then the sidecar)."""
        deferred = self._pending.get(name)
        if deferred is not None:
            statuses[name], generations[name] = deferred.status, deferred.generation
            return
        element = arrays.split(name)
        if element is not None:
            held = held_arrays.get(element[0])
            status = held.elements.get(element[1]) if held is not None else None
            generation = held.generations.get(element[1], 0) if held is not None else 0
        else:
            sidecar = self.sidecars.get(name)
            status = sidecar.status if sidecar is not None else None
            generation = sidecar.generation if sidecar is not None else 0
        if status is None:
            statuses.pop(name, None)
            generations.pop(name, None)
        else:
            statuses[name], generations[name] = status, generation

    def all_statuses(self) -> StatusView:
        """Every status held: the sidecars read, array elements, what is deferred."""
        statuses: dict[str, TaskStatus] = {}
        generations: dict[str, int] = {}
        for name, sidecar in self.sidecars.items():
            if sidecar.status is not None:  # None: unparsable, counts as absent
                statuses[name], generations[name] = sidecar.status, sidecar.generation
        for array, held in self._arrays.held.items():
            for index, status in held.elements.items():
                element = arrays.element_name(array, index)
                statuses[element] = status
                generations[element] = held.generations.get(index, 0)
        # What waits to be written is newer, and only this process writes sidecars.
        for name, deferred in self._pending.items():
            statuses[name], generations[name] = deferred.status, deferred.generation
        return statuses, generations

    def _read_sidecars(self, entries: Mapping[str, TaskInput]) -> dict[str, _Sidecar] | None:
        """Every sidecar on disk; None when the status folder does not exist yet."""
        try:
            top = self._lister.real_dir(self._sidecar_root)
        except FolderUnavailable:
            if self._status_dir is None or os.path.lexists(self._status_dir):
                raise
            return None
        walk = self._lister.walk(top, lambda n: n.endswith(STATUS_SUFFIX), None)
        sidecars: dict[str, _Sidecar] = {}
        found: dict[str, ArraySidecar] = {}
        for rel, entry in walk.files:
            name = rel.removesuffix(STATUS_SUFFIX)
            if (spec := entries.get(name)) is not None:
                name = spec.name  # the spec's string: one per task
            if rel == STATUS_FILE or rel in walk.crossings:
                continue  # the queues' status; or another team's, reached by a symlink
            if rel.endswith(arraystatus.SUFFIX):
                array = rel.removesuffix(arraystatus.SUFFIX)
                held = self._arrays.load(array, entry)
                if held is not None:
                    found[array] = held
                continue
            try:
                sidecar = self._load_sidecar(name, rel, entry)
            except Unreadable:
                walk.unreadable.append(rel)
                continue
            if sidecar is not None:
                sidecars[name] = sidecar
        for name, old in self.sidecars.items():
            if name not in sidecars and under_any(name + STATUS_SUFFIX, walk.unreadable):
                sidecars[name] = old
        # What this process holds and has not written yet is newer than the disk.
        self._arrays.found(found)
        return sidecars

    def _load_sidecar(self, name: str, rel: str, entry: os.DirEntry[str]) -> _Sidecar | None:
        try:
            st = entry.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._lister.warn_once(entry.path, f"cannot read sidecar: {exc.strerror}")
            raise Unreadable from exc
        key = pack_stat(st)
        cached = self.sidecars.get(name)
        if cached is not None and cached.key == key:
            return cached
        try:
            read = self._read_file(entry.path, MAX_FILE_BYTES + 1)
        except OSError as exc:
            self._lister.warn_once(entry.path, f"cannot read sidecar: {exc.strerror}")
            raise Unreadable from exc
        if read is None:
            return None
        data = read[0]
        try:
            status: TaskStatus | None = self._parse_status(data, file=rel)
        except SpecParseError as exc:
            # Counts as absent: the reconciler rebuilds status from the world.
            log.warning("ignoring unreadable sidecar %s: %s", entry.path, exc.errors[0])
            status = None
        return _Sidecar(key, status, sidecar_digest(data), next(self._generations))

    # --- writing ---------------------------------------------------------------------------

    def write(
        self, name: str, path: Path, status: TaskStatus, data: bytes, durable: bool, links: bool
    ) -> bool:
        """Write `data` (the dumped `status`) to the sidecar of `name` at `path`, replacing a
        status deferred for it; False (and no write) if the bytes are unchanged. `links`: the
        last walk met a symlink."""
        self._pending.pop(name, None)
        self._touched.add(name)
        generation = next(self._generations)
        return self.write_sidecar(name, path, status, data, durable, generation, links)

    def write_sidecar(
        self,
        name: str,
        path: str | Path,
        status: TaskStatus,
        data: bytes,
        durable: bool,
        generation: int,
        links: bool,
    ) -> bool:
        if links and self._lister.crosses(Path(path)):
            # The sidecar's folder is a symlink into another team's: never write there (it
            # would be that team's status file). Kept in memory; the spec is Invalid anyway.
            self.sidecars[name] = _Sidecar(0, status, sidecar_digest(data), generation)
            return False
        mode = _SIDECAR_MODE
        if name in self.sidecars or not self._read_once:
            # Compare with what is there: identical bytes are not written again. A sidecar
            # neither the last full read found nor this process wrote is not there (only
            # this process writes sidecars), so a new one costs no stat.
            try:
                st: os.stat_result | None = os.stat(path)
            except OSError:
                st = None  # missing (or unreadable: the write then says why)
            if st is not None:
                key = pack_stat(st)
                mode = stat.S_IMODE(st.st_mode)
                cached = self.sidecars.get(name)
                digest = sidecar_digest(data)
                if cached is not None and cached.key == key:
                    on_disk = cached.digest
                else:
                    read = self._read_file(path, -1)
                    on_disk = sidecar_digest(read[0]) if read is not None else b""
                if on_disk == digest:
                    self.sidecars[name] = _Sidecar(key, status, digest, generation)
                    return False
        # In a batch, each folder is fsynced once when the batch ends (before the loop's Ray
        # calls that depend on these records), not once per file.
        batched = durable and self._batching > 0
        written = self._write_file(path, data, durable=durable, mode=mode, sync_folder=not batched)
        if batched:
            self._unsynced_folders.add(os.path.dirname(os.fspath(path)))
        self.sidecars[name] = _Sidecar(pack_key(written), status, sidecar_digest(data), generation)
        return True

    def set_element(self, array: str, index: int, status: TaskStatus | None, durable: bool) -> bool:
        """Set (or with None forget) one array element's status; written now unless in a
        batch."""
        self._touched.add(arrays.element_name(array, index))
        if not self._arrays.set_status(array, index, status, durable):
            return False
        if not self._batching and self._arrays.write_changed():
            raise OSError(f"cannot write the status of array {array}")
        return True

    def begin_batch(self) -> None:
        self._batching += 1

    def end_batch(self) -> set[str]:
        """Close a batch; when it was the last, write the array sidecars that changed and
        fsync the folders written durably. The elements whose sidecar could not be written."""
        self._batching -= 1
        if self._batching:
            return set()
        failed = self._arrays.write_changed()
        sync_folders(self._unsynced_folders)
        self._unsynced_folders = set()
        return failed

    def defer(self, name: str, status: TaskStatus) -> None:
        """Keep `status` for a later flush; read_view hands it out meanwhile."""
        self._touched.add(name)
        held = self._pending.get(name)
        since = held.since if held is not None else self._clock()
        # Keeps its place when held already: _pending stays in the order of `since`.
        self._pending[name] = _Deferred(status, since, next(self._generations))
        self._fresh_order = None

    def flush(self, budget: int, min_age: float, links: bool) -> int:
        """Write up to `budget` deferred statuses, without fsync (see TaskStore.flush_statuses).
        `links`: the last walk met a symlink."""
        if not self._pending:
            return 0
        now = self._clock()
        if self._fresh_order is None:
            fresh: list[tuple[int, str]] = []
            for name, deferred in self._pending.items():
                if name not in self.sidecars:
                    position = deferred.status.status.queue_position
                    fresh.append((position if position is not None else 1 << 62, name))
            fresh.sort(reverse=True)  # popped from the end: the front of the queue first
            self._fresh_order = [n for _, n in fresh]
        order = self._fresh_order
        chosen: list[str] = []
        while order and len(chosen) < budget:
            name = order.pop()
            if name in self._pending and name not in self.sidecars:
                chosen.append(name)
        if len(chosen) < budget:
            for name, deferred in self._pending.items():
                if name not in self.sidecars:
                    continue  # a new record: in the order above
                if now - deferred.since < min_age:
                    break  # deferred in order of `since`: the rest are younger still
                chosen.append(name)
                if len(chosen) >= budget:
                    break
        base = os.fspath(self._sidecar_root)
        written = 0
        for name in chosen:
            deferred = self._pending[name]
            status = deferred.status  # written as it was handed out: its generation stays
            path = os.path.join(base, name + STATUS_SUFFIX)  # no pathlib: one per record
            try:
                data = dump_status(status).encode()
                self.write_sidecar(name, path, status, data, False, deferred.generation, links)
            except OSError as exc:
                self._lister.warn_once(str(path), f"cannot write: {exc.strerror}")
                if name not in self.sidecars:
                    order.insert(0, name)  # tried again after the others
                continue
            del self._pending[name]
            written += 1
        return written

    def delete(self, name: str, path: Path) -> None:
        """Forget the status of `name` and remove its sidecar at `path`; a missing one is
        fine."""
        self._touched.add(name)
        self.sidecars.pop(name, None)
        self._pending.pop(name, None)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if self._status_dir is not None:
            # The parallel tree is ours: prune folders it no longer needs.
            prune_empty_parents(path.parent, self._status_dir)
