"""The tasks folder as a database: specs in, status sidecars out.

A task is `<name>.yaml` (or `.yml`) under the root; its name is the relative path without the
extension. Sidecars are `<name>.status.yaml`, beside the spec or in a parallel `status_dir`.
Parsing is cached by (st_mtime_ns, st_size, st_ino), so a steady rescan costs one stat per file.

Every spec entry and every status the store hands out carries a generation: a number from one
counter that only grows (like Kubernetes' resourceVersion). A file read anew, an entry that
differs, a status written or deferred gets a new one; whatever is unchanged keeps its own. So
"unchanged since the last read" is one comparison of integers for the loop's caches.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from specs.folder.arrayfiles import _ArraySidecar
from specs.folder.atomic import replace_file as write_sidecar_file
from specs.folder.changes import _EventScan
from specs.folder.paths import (  # re-exported: callers import these from specs.folder.store
    MAX_NAME_LENGTH as MAX_NAME_LENGTH,
)
from specs.folder.paths import (
    SIDECAR_SUFFIXES as SIDECAR_SUFFIXES,
)
from specs.folder.paths import (
    TASK_SUFFIXES,
    FolderSettling,
    PackedKey,
    StatKey,
    _digest,
    _dir_id,
    _is_queue_config,
    _is_spec_file,
    _packed,
    _packed_mtime_ns,
    _read_regular,
    _read_with_stat,
    _rel_of,
    _stat_packed,
    _strip,
    _under_any,
    _Unreadable,
)
from specs.folder.paths import (
    FolderUnavailable as FolderUnavailable,
)
from specs.folder.paths import (
    InvalidName as InvalidName,
)
from specs.folder.paths import (
    validate_name as validate_name,
)
from specs.folder.statusfiles import _Deferred, _Sidecar, _StatusSidecars
from specs.queues.config import CONFIG_FILE, is_reserved
from specs.task.models import MAX_ARRAY_ELEMENTS
from specs.task.records import Task
from specs.task.status import TaskStatus
from specs.yamlio.parse import (
    MAX_FILE_BYTES,
    Problem,
    SpecError,
    SpecParseError,
    parse_status,
    parse_task,
)

log = logging.getLogger("rayqueue.store")


_SIDECAR_MODE = 0o644  # a new sidecar's: readable by the users and tools that watch the queue
_WHOLE_KEPT = 10_000  # stat keys of finished files remembered (mark_whole)


@dataclass(frozen=True, slots=True)
class SpecEntry:
    """One task as found on disk in the latest scan."""

    name: str  # relative path without extension, "/" separated: team-a/train
    # The file (`path`), under the root as given (not resolved), so it survives a git-sync
    # swap. The store gives the root (one Path shared by every entry) and `rel`, the file's
    # relative path: a Path per entry cost ~0.2 KB a task.
    base: Path
    task: Task | None  # None when invalid
    error: SpecError | None  # first error when invalid; str(error) is the status message
    last_valid: Task | None  # last good parse of this name in this process
    raw_hash: str  # sha256 of the file bytes; "" when the file was too large to read
    generation: int = 0  # the store's: a new one whenever anything above changes
    rel: str = ""  # "": `base` is the file itself

    @property
    def path(self) -> Path:
        return self.base / self.rel if self.rel else self.base

    def _compared(self) -> tuple[object, ...]:
        return (self.name, self.path, self.task, self.error, self.last_valid, self.raw_hash,
                self.generation)  # fmt: skip

    def __eq__(self, other: object) -> bool:  # by the path, however it is kept
        if not isinstance(other, SpecEntry):
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:  # the fields that hash (a Task's labels are a dict)
        return hash((self.name, self.path, self.raw_hash, self.generation))


@dataclass(frozen=True, slots=True)
class _Parsed:
    key: PackedKey
    task: Task | None
    error: SpecError | None
    raw_hash: str
    whole: bool = False  # known complete when read: no settle wait (see _is_whole)
    generation: int = 0  # of this read of the file


class TaskStore(_EventScan, _StatusSidecars):
    """Specs and sidecars under `root`. Safe to share between threads; no I/O until used."""

    def __init__(
        self,
        root: Path,
        status_dir: Path | None = None,
        *,
        settle_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        check: Callable[[str, Task], Sequence[Problem]] | None = None,
        max_array_elements: int = MAX_ARRAY_ELEMENTS,
    ) -> None:
        self.root = Path(root)
        # The setting max_array_elements: a larger array reads as Invalid.
        self.max_array_elements = max_array_elements
        # What a spec must also pass beyond its own file (runtimeEnv paths: runtimepaths.py),
        # given its task name; checked whenever the file is (re)read.
        self.check = check
        self.status_dir = None if status_dir is None else Path(status_dir)
        # A file that changed, appeared or vanished since the last scan is reported as it was
        # until it has stayed so for settle_seconds: a half-written file or a git checkout
        # midway must never read as an edit or a deletion. 0 (the default) reports at once.
        self.settle_seconds = settle_seconds
        self._clock = clock
        self._scanned = False
        self._top = ""  # the real root of the last full walk
        self._links = False  # that walk met a symlink
        self._reported_keys: dict[str, PackedKey] = {}  # stat key behind each reported entry
        self._seen: dict[str, tuple[PackedKey, float]] = {}  # key on disk, since when
        self._missing_since: dict[str, float] = {}
        self._lock = threading.Lock()
        # By relative path as walked from _parsed_top (not by the whole path: a string per
        # task); a walk from another real root (git-sync swapped the link) starts afresh.
        self._parsed: dict[str, _Parsed] = {}
        self._parsed_top = ""
        self._entries: dict[str, SpecEntry] = {}
        # By name: the last good parse of the name (its task and that read's generation).
        self._last_valid: dict[str, _Parsed] = {}
        # By name: what the reported entry was made of (a tuple, or for a valid file alone
        # its parse, no tuple more per task); an entry made of the same is kept.
        self._basis: dict[str, object] = {}
        self._generations = itertools.count(1)
        self._sidecars: dict[str, _Sidecar] = {}  # by task name
        # Statuses handed to defer_status and not yet on disk.
        self._pending: dict[str, _Deferred] = {}
        # The new records among them, the last to write first; None: sort again.
        self._fresh_order: list[str] | None = None
        self._statuses_read = False
        self._status_view: tuple[dict[str, TaskStatus], dict[str, int]] | None = None
        self._status_touched: set[str] = set()
        self._status_rebuilt = True
        self._warned: set[tuple[str, str]] = set()
        self._held: list[str] = []  # names the first scan found still being written
        self._crossed: set[str] = set()  # names the last walk found behind a cross-team link
        # Arrays (specs/task/arrays.py): the elements of each array entry, by its generation; and
        # each array's one sidecar, by array name. In a batch, array sidecars are written once.
        self._expanded: dict[str, tuple[int, dict[str, SpecEntry]]] = {}
        # What the last scan handed out (arrays as their elements), kept to update it by the
        # names a scan of events looked at (_looked_at) rather than rebuild it.
        self._shown: dict[str, SpecEntry] | None = None
        self._looked_at: set[str] = set()
        self._arrays: dict[str, _ArraySidecar] = {}
        self._batching = 0
        self._unsynced_folders: set[str] = set()  # durable writes of a batch: fsync at its end
        # Stat keys of files their writer is known to have finished (mark_whole): no settle
        # wait for them. Insertion-ordered, and only the latest _WHOLE_KEPT are kept.
        self._whole: dict[PackedKey, None] = {}

    # --- specs ---------------------------------------------------------------------------

    def scan(self, changed: Iterable[str] | None = None) -> dict[str, SpecEntry]:
        """Every task file under the root, parsed (or taken from the cache if unchanged).

        `changed`: the paths file events named since the last scan. Only those, and names
        still settling, are looked at then; anything the events cannot describe exactly (a
        folder, a symlink anywhere in the tree, the root swapped to a new target) falls back
        to a full walk. None: a full walk.
        """
        return self.scan_changes(changed)[0]

    def mark_whole(self, keys: Iterable[StatKey]) -> None:
        """Files with these stat keys are complete (a watcher saw their writer close them, or
        a rename put them in place): read them without waiting out the settle time. A later
        write changes the key, and the file settles again."""
        with self._lock:
            for key in keys:
                self._whole[_packed(key)] = None
            while len(self._whole) > _WHOLE_KEPT:
                del self._whole[next(iter(self._whole))]

    def _scan_all(self) -> dict[str, SpecEntry]:
        top = self._real_dir(self.root)
        if top != self._parsed_top:
            self._parsed, self._parsed_top = {}, top
        skip = _dir_id(self.status_dir) if self.status_dir is not None else None
        walk = self._walk(top, _is_spec_file, skip)
        by_name: dict[str, list[tuple[str, str, Callable[[], os.stat_result]]]] = {}
        crossed: dict[str, str] = {}
        for rel, entry in walk.files:
            name = _strip(rel, TASK_SUFFIXES)
            if _is_queue_config(name):
                continue  # the queue configuration, read by the loop, not a task
            if rel in walk.crossings:
                crossed.setdefault(name, rel)
                continue
            files = by_name.get(name)
            if files is None:
                by_name[name] = [(rel, entry.path, entry.stat)]
            else:
                files.append((rel, entry.path, entry.stat))
        parsed: dict[str, _Parsed] = {}
        entries: dict[str, SpecEntry] = {}
        unreadable = list(walk.unreadable)
        now = self._clock()
        self._held = []
        for name, rel in crossed.items():
            # Never read: the file belongs to another team's folder.
            message = walk.crossings[rel]
            last = self._last_valid.get(name)
            basis = ("crossed", rel, message, last.generation if last is not None else None)
            error = SpecError(rel, None, None, None, message)
            last_task = last.task if last is not None else None
            build = functools.partial(
                SpecEntry, name, self.root, None, error, last_task, "", rel=rel
            )
            entries[name] = self._stamped(name, basis, build)
            by_name.pop(name, None)
        for name, files in by_name.items():
            if not self._take(name, files, now, entries, parsed):
                unreadable.append(files[0][0])
        if self._held:
            # With no earlier scan there is no old content to report meanwhile, and leaving
            # the name out would read as a deletion: so the whole scan waits (a second at most
            # per unchanged file). The parses are kept.
            held = sorted(self._held)
            self._parsed = parsed
            shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
            raise FolderSettling(
                f"{len(held)} spec file(s) written less than {self.settle_seconds:g} s before "
                f"the first scan ({shown}); waiting for them to settle"
            )
        for name, old in self._entries.items():
            if name in entries:
                continue
            # An unreadable file or folder keeps its last entry: a permissions hiccup must
            # not look like a deletion, which would stop running jobs.
            if _under_any(_rel_of(old), unreadable):
                entries[name] = old
            # Nor may a file that is gone for a moment (git unlinks and rewrites on checkout).
            elif self.settle_seconds > 0:
                since = self._missing_since.setdefault(name, now)
                if now - since < self.settle_seconds:
                    entries[name] = old
        self._missing_since = {
            n: t for n, t in self._missing_since.items() if n in entries and n not in by_name
        }
        self._seen = {n: v for n, v in self._seen.items() if n in by_name}
        self._crossed = set(crossed)
        self._reported_keys = {n: k for n, k in self._reported_keys.items() if n in entries}
        self._scanned = True
        self._top, self._links = top, walk.links
        self._parsed = parsed
        self._entries = entries
        self._last_valid = {n: t for n, t in self._last_valid.items() if n in entries}
        self._basis = {n: b for n, b in self._basis.items() if n in entries}
        return dict(entries)

    def _take(
        self,
        name: str,
        files: list[tuple[str, str, Callable[[], os.stat_result]]],
        now: float,
        entries: dict[str, SpecEntry],
        parsed: dict[str, _Parsed],
    ) -> bool:
        """Load the files defining `name` into `entries` (the old entry while it settles);
        False if unreadable. A file gone since the listing leaves `name` out."""
        old = self._entries.get(name)
        if old is not None:
            name = old.name  # one string per name kept, not one more per walk
        if len(files) > 1:
            files.sort(key=lambda f: f[0].endswith(".yml"))  # .yaml wins
        rel, path, stat_of = files[0]
        if old is not None and old.rel == rel:
            rel = old.rel  # the same for the parse cache's key
        try:
            result = self._load_spec(rel, path, stat_of, name)
        except _Unreadable:
            return False
        if result is None:  # gone since the listing
            return True
        parsed[rel] = result
        if self._settling(name, result, now):
            old = self._entries.get(name)
            if old is not None:
                entries[name] = old  # as it was; a new file waits to be reported
            return True
        entries[name] = self._entry(name, rel, result, [f[0] for f in files[1:]])
        self._reported_keys[name] = result.key
        return True

    def _settling(self, name: str, parsed: _Parsed, now: float) -> bool:
        """Whether the file behind `name` changed too recently to be believed yet."""
        key = parsed.key
        if self.settle_seconds <= 0 or parsed.whole or key in self._whole:
            return False
        if not self._scanned:
            # Files older than the settle time were complete when serve started; a younger
            # one may be mid-write (written while serve was down, or just as it started).
            young = time.time_ns() - _packed_mtime_ns(key) < self.settle_seconds * 1e9
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

    def spec_path(self, name: str) -> Path:
        """The existing `name.yaml` or `name.yml`, else where `name.yaml` would go."""
        validate_name(name)
        candidates = [self.root / f"{name}{suffix}" for suffix in TASK_SUFFIXES]
        path = next((p for p in candidates if p.exists()), candidates[0])
        self._check_inside(path, name)
        return path

    def read_spec_text(self, name: str) -> bytes | None:
        """The spec's bytes, or None if there is no such (regular) file."""
        return _read_regular(self.spec_path(name))

    def delete_spec(self, name: str) -> bool:
        """Remove every file that defines the task (.yaml and .yml); True if any existed."""
        validate_name(name)
        removed = False
        for suffix in TASK_SUFFIXES:
            path = self.root / f"{name}{suffix}"
            self._check_inside(path, name)
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            removed = True
        return removed

    # --- statuses ------------------------------------------------------------------------

    def _write_sidecar(
        self,
        name: str,
        path: str | Path,
        status: TaskStatus,
        data: bytes,
        durable: bool,
        generation: int,
    ) -> bool:
        if self._links and self._crosses(Path(path)):
            # The sidecar's folder is a symlink into another team's: never write there (it
            # would be that team's status file). Kept in memory; the spec is Invalid anyway.
            self._sidecars[name] = _Sidecar(0, status, _digest(data), generation)
            return False
        mode = _SIDECAR_MODE
        if name in self._sidecars or not self._statuses_read:
            # Compare with what is there: identical bytes are not written again. A sidecar
            # neither the last full read found nor this process wrote is not there (only
            # this process writes sidecars), so a new one costs no stat.
            try:
                st: os.stat_result | None = os.stat(path)
            except OSError:
                st = None  # missing (or unreadable: the write then says why)
            if st is not None:
                key = _stat_packed(st)
                mode = stat.S_IMODE(st.st_mode)
                cached = self._sidecars.get(name)
                digest = _digest(data)
                if cached is not None and cached.key == key:
                    on_disk = cached.digest
                else:
                    read = _read_regular(path)
                    on_disk = _digest(read) if read is not None else b""
                if on_disk == digest:
                    self._sidecars[name] = _Sidecar(key, status, digest, generation)
                    return False
        # In a batch, each folder is fsynced once when the batch ends (before the loop's Ray
        # calls that depend on these records), not once per file.
        batched = durable and self._batching > 0
        written = write_sidecar_file(
            path, data, durable=durable, mode=mode, sync_folder=not batched
        )
        if batched:
            self._unsynced_folders.add(os.path.dirname(os.fspath(path)))
        self._sidecars[name] = _Sidecar(_packed(written), status, _digest(data), generation)
        return True

    # --- internals -----------------------------------------------------------------------

    def _load_spec(
        self, rel: str, path: str, stat_of: Callable[[], os.stat_result], name: str
    ) -> _Parsed | None:
        """Parse a spec file, or reuse the cached parse (and its generation) if its stat is
        unchanged."""
        try:
            st = stat_of()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._warn_once(path, f"cannot read: {exc.strerror}")
            raise _Unreadable from exc
        key = _stat_packed(st)
        cached = self._parsed.get(rel)
        if cached is not None and cached.key == key:
            return cached
        return self._parse_spec(rel, path, st, key, name)

    def _parse_spec(
        self, rel: str, path: str, st: os.stat_result, key: PackedKey, name: str
    ) -> _Parsed | None:
        if st.st_size > MAX_FILE_BYTES:
            message = f"file is larger than the {MAX_FILE_BYTES // 1024} KiB limit"
            error: SpecError | None = SpecError(rel, None, None, None, message)
            return _Parsed(key, None, error, "", generation=next(self._generations))
        try:
            read = _read_with_stat(path, limit=MAX_FILE_BYTES + 1)
        except OSError as exc:
            self._warn_once(path, f"cannot read: {exc.strerror}")
            raise _Unreadable from exc
        if read is None:  # replaced by a non-regular file, or deleted, since the listing
            return None
        data, after = read
        whole = _is_whole(key, after)
        stem = name.rsplit("/", 1)[-1]
        if is_reserved(stem):
            message = (
                f"file names starting with '_' are reserved for configuration (like "
                f"{CONFIG_FILE}), so this is not run as a task; rename it to drop the '_'"
            )
            reserved = SpecError(rel, None, None, None, message)
            raw = hashlib.sha256(data).hexdigest()
            return _Parsed(key, None, reserved, raw, generation=next(self._generations))
        try:
            check = None if self.check is None else functools.partial(self.check, name)
            task: Task | None = parse_task(
                data,
                file=rel,
                expected_name=stem,
                task_name=name,
                check=check,
                max_array_elements=self.max_array_elements,
            )
            error = None
        except SpecParseError as exc:
            task, error = None, exc.errors[0]
        raw = hashlib.sha256(data).hexdigest()
        return _Parsed(key, task, error, raw, whole, next(self._generations))

    def _entry(self, name: str, rel: str, result: _Parsed, others: list[str]) -> SpecEntry:
        task, error = result.task, result.error
        if others:
            # Names are the keys, so only one entry can stand; it carries the conflict.
            files = " and ".join([rel, *others])
            task, error = None, SpecError(rel, None, None, None, f"both {files} define task {name}")
        if task is not None:
            self._last_valid[name] = result
        last = self._last_valid.get(name)
        basis: object
        if last is result:  # valid, alone: the parse itself says what the entry is made of
            basis = result
        else:
            last_generation = last.generation if last is not None else None
            basis = (result.generation, tuple(others), last_generation, rel)
        last_task = last.task if last is not None else None
        raw = result.raw_hash
        return self._stamped(
            name, basis, lambda g: SpecEntry(name, self.root, task, error, last_task, raw, g, rel)
        )

    def _stamped(self, name: str, basis: object, build: Callable[[int], SpecEntry]) -> SpecEntry:
        """The entry `build` makes with a new generation, or the entry last reported for
        `name` (generation and all) when it was made of the same reads (`basis`): then nothing
        is built (a full walk of an unchanged folder builds no entries)."""
        old = self._entries.get(name)
        if old is not None and self._basis.get(name) == basis:
            return old
        self._basis[name] = basis
        return build(next(self._generations))

    def _load_sidecar(self, name: str, rel: str, entry: os.DirEntry[str]) -> _Sidecar | None:
        try:
            st = entry.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._warn_once(entry.path, f"cannot read sidecar: {exc.strerror}")
            raise _Unreadable from exc
        key = _stat_packed(st)
        cached = self._sidecars.get(name)
        if cached is not None and cached.key == key:
            return cached
        try:
            data = _read_regular(entry.path, limit=MAX_FILE_BYTES + 1)
        except OSError as exc:
            self._warn_once(entry.path, f"cannot read sidecar: {exc.strerror}")
            raise _Unreadable from exc
        if data is None:
            return None
        try:
            status: TaskStatus | None = parse_status(data, file=rel)
        except SpecParseError as exc:
            # Counts as absent: the reconciler rebuilds status from the world.
            log.warning("ignoring unreadable sidecar %s: %s", entry.path, exc.errors[0])
            status = None
        return _Sidecar(key, status, _digest(data), next(self._generations))


# --- helpers -------------------------------------------------------------------------------


def _is_whole(key: PackedKey, after: os.stat_result) -> bool:
    """Whether bytes read from a file are its finished content, so that no settle wait is needed.

    Settling guards against reading a file while someone still writes it: an editor saving in
    place, `cp`, a shell appending piece by piece, git writing a checkout. Every such data
    write stamps the file's modification time and change time with the same instant, so
    between two pieces ctime == mtime. A writer that publishes a file whole does one more
    thing after its last write: it renames the finished file into place (our API and CLI via
    specs/folder/atomic.py, git-sync, `mv`), or sets its mode or times (`install`, `cp -p`, tar).
    Those change only ctime, leaving ctime > mtime. So ctime > mtime means the last thing done
    to the file was not a data write: its content is complete. Equal times prove nothing and
    wait as before (a rename in the same clock tick as the write; write_atomic rules that out
    for our own writes). The stat is taken after reading and must still match the listing's,
    so the bytes read are the bytes this stat describes; a write that raced the read changes
    mtime (and sets ctime == mtime), and the file waits.
    """
    return _stat_packed(after) == key and (after.st_ctime_ns > after.st_mtime_ns)
