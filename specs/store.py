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

import contextlib
import functools
import hashlib
import itertools
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from specs import arrays, arraystatus
from specs.atomic import write_atomic
from specs.models import MAX_ARRAY_ELEMENTS, Task, TaskStatus
from specs.parse import (
    MAX_FILE_BYTES,
    Problem,
    SpecError,
    SpecParseError,
    dump_status,
    parse_status,
    parse_task,
)
from specs.queues import CONFIG_FILE, STATUS_FILE, is_reserved

log = logging.getLogger("rayqueue.store")

TASK_SUFFIXES = (".yaml", ".yml")
STATUS_SUFFIX = ".status.yaml"
SIDECAR_SUFFIXES = (".status.yaml", ".status.yml")
EDITOR_SUFFIXES = ("~", ".swp", ".swx")
MAX_NAME_LENGTH = 200
# A cap on directories per walk, so a web of symlinked directories cannot explode the scan.
MAX_DIRECTORIES = 100_000

_CONFIG_NAME = CONFIG_FILE.removesuffix(".yaml")
_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")

StatKey = tuple[int, int, int]
_WHOLE_KEPT = 10_000  # stat keys of finished files remembered (mark_whole)


class FolderUnavailable(Exception):
    """The tasks folder (or status folder) is missing, not a directory, or unreadable."""


class FolderSettling(FolderUnavailable):
    """The first scan found spec files still being written: nothing is believed yet."""


class InvalidName(ValueError):
    """A task name from the API or CLI is not acceptable."""


def validate_name(name: str) -> str:
    """Check a task name given by a user (API, CLI); return it unchanged.

    Stricter than what a scan accepts: the filesystem may hold any name, but names we create
    must be portable and safe in URLs and Ray metadata.
    """
    if not name:
        raise InvalidName("task name must not be empty")
    if "\x00" in name:
        raise InvalidName("task name must not contain NUL")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"task name is {len(name)} characters long; the limit is 200")
    if name.startswith("/"):
        raise InvalidName(f"task name {name!r} must be relative (no leading '/')")
    for segment in name.split("/"):
        if not segment:
            raise InvalidName(f"task name {name!r} has an empty segment ('//' or a trailing '/')")
        if segment in (".", ".."):
            raise InvalidName(f"task name {name!r} must not contain '.' or '..' segments")
        if segment.startswith("."):
            raise InvalidName(f"task name {name!r}: segment {segment!r} would be a hidden file")
        if not _SEGMENT.fullmatch(segment):
            raise InvalidName(
                f"task name {name!r} may only contain ASCII letters, digits, '.', '_', '-',"
                " and '/' between segments"
            )
    if name.endswith(".status"):
        raise InvalidName(f"task name {name!r} must not end with '.status' (sidecar names)")
    if is_reserved(name.rsplit("/", 1)[-1]):
        raise InvalidName(
            f"task name {name!r}: names starting with '_' are reserved for configuration"
        )
    return name


@dataclass(frozen=True)
class SpecEntry:
    """One task as found on disk in the latest scan."""

    name: str  # relative path without extension, "/" separated: team-a/train
    path: Path  # under the root as given (not resolved), so it survives a git-sync swap
    task: Task | None  # None when invalid
    error: SpecError | None  # first error when invalid; str(error) is the status message
    last_valid: Task | None  # last good parse of this name in this process
    raw_hash: str  # sha256 of the file bytes; "" when the file was too large to read
    generation: int = 0  # the store's: a new one whenever anything above changes


@dataclass(frozen=True)
class _Parsed:
    key: StatKey
    task: Task | None
    error: SpecError | None
    raw_hash: str
    whole: bool = False  # known complete when read: no settle wait (see _is_whole)
    generation: int = 0  # of this read of the file


@dataclass(frozen=True)
class _Sidecar:
    key: StatKey
    status: TaskStatus | None  # None: unparsable, counts as absent
    digest: bytes  # of the bytes on disk, to skip identical rewrites (not the bytes: memory)
    generation: int  # of `status`: kept while it is the status held


@dataclass(frozen=True)
class _Deferred:
    status: TaskStatus
    since: float  # deferred since (the store's clock)
    generation: int


@dataclass
class _ArraySidecar:
    """One array's sidecar: its elements' statuses (by index) and what is on disk."""

    key: StatKey | None
    data: bytes
    elements: dict[int, TaskStatus]
    generations: dict[int, int]
    dirty: bool = False
    durable: bool = False


class _Unreadable(Exception):
    """A file exists but cannot be read right now: keep what we knew of it."""


@dataclass
class _Walk:
    files: list[tuple[str, os.DirEntry[str]]]  # (relative path, entry), regular files only
    unreadable: list[str]  # relative files and "dir/" prefixes we could not read
    links: bool = False  # a symlink somewhere: file events cannot be mapped to names
    # Files reached through a symlink from one team folder into another: why each is refused.
    crossings: dict[str, str] = field(default_factory=dict)


class TaskStore:
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
        self._reported_keys: dict[str, StatKey] = {}  # stat key behind each reported entry
        self._seen: dict[str, tuple[StatKey, float]] = {}  # key on disk, since when
        self._missing_since: dict[str, float] = {}
        self._lock = threading.Lock()
        self._parsed: dict[str, _Parsed] = {}  # by real path as walked
        self._entries: dict[str, SpecEntry] = {}
        # By name: the last good parse of the name, and that read's generation.
        self._last_valid: dict[str, tuple[Task, int]] = {}
        # By name: what the reported entry was made of; an entry made of the same is kept.
        self._basis: dict[str, tuple[object, ...]] = {}
        self._generations = itertools.count(1)
        self._sidecars: dict[str, _Sidecar] = {}  # by task name
        # Statuses handed to defer_status and not yet on disk.
        self._pending: dict[str, _Deferred] = {}
        self._statuses_read = False
        self._warned: set[tuple[str, str]] = set()
        self._held: list[str] = []  # names the first scan found still being written
        self._crossed: set[str] = set()  # names the last walk found behind a cross-team link
        # Arrays (specs/arrays.py): the elements of each array entry, by its generation; and
        # each array's one sidecar, by array name. In a batch, array sidecars are written once.
        self._expanded: dict[str, tuple[int, dict[str, SpecEntry]]] = {}
        self._arrays: dict[str, _ArraySidecar] = {}
        self._batching = 0
        # Stat keys of files their writer is known to have finished (mark_whole): no settle
        # wait for them. Insertion-ordered, and only the latest _WHOLE_KEPT are kept.
        self._whole: dict[StatKey, None] = {}

    # --- specs ---------------------------------------------------------------------------

    def scan(self, changed: Iterable[str] | None = None) -> dict[str, SpecEntry]:
        """Every task file under the root, parsed (or taken from the cache if unchanged).

        `changed`: the paths file events named since the last scan. Only those, and names
        still settling, are looked at then; anything the events cannot describe exactly (a
        folder, a symlink anywhere in the tree, the root swapped to a new target) falls back
        to a full walk. None: a full walk.
        """
        with self._lock:
            names = None if changed is None else self._names_of(changed)
            if names is not None:
                entries = self._scan_names(names)
                if entries is not None:
                    return self._elements(entries)
            return self._elements(self._scan_all())

    def mark_whole(self, keys: Iterable[StatKey]) -> None:
        """Files with these stat keys are complete (a watcher saw their writer close them, or
        a rename put them in place): read them without waiting out the settle time. A later
        write changes the key, and the file settles again."""
        with self._lock:
            for key in keys:
                self._whole[key] = None
            while len(self._whole) > _WHOLE_KEPT:
                del self._whole[next(iter(self._whole))]

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
            return self._elements(dict(self._entries)) if self._scanned else None

    def _elements(self, entries: dict[str, SpecEntry]) -> dict[str, SpecEntry]:
        """`entries` with every array replaced by its elements (cached per generation)."""
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
        return out

    def _scan_all(self) -> dict[str, SpecEntry]:
        top = self._real_dir(self.root)
        skip = _dir_id(self.status_dir) if self.status_dir is not None else None
        walk = self._walk(top, _is_spec_file, skip)
        by_name: dict[str, list[tuple[str, str, Callable[[], os.stat_result]]]] = {}
        crossed: dict[str, str] = {}
        for rel, entry in walk.files:
            if _strip(rel, TASK_SUFFIXES) == _CONFIG_NAME:
                continue  # the queue configuration, read by the loop, not a task
            if rel in walk.crossings:
                crossed.setdefault(_strip(rel, TASK_SUFFIXES), rel)
                continue
            files = by_name.setdefault(_strip(rel, TASK_SUFFIXES), [])
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
            basis = ("crossed", rel, message, last[1] if last is not None else None)
            error = SpecError(rel, None, None, None, message)
            last_task = last[0] if last is not None else None
            crossing = SpecEntry(name, self.root / rel, None, error, last_task, "")
            entries[name] = self._stamped(name, basis, crossing)
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
        files.sort(key=lambda f: f[0].endswith(".yml"))  # .yaml wins
        rel, path, stat_of = files[0]
        try:
            result = self._load_spec(rel, path, stat_of, name)
        except _Unreadable:
            return False
        if result is None:  # gone since the listing
            return True
        parsed[path] = result
        if self._settling(name, result, now):
            old = self._entries.get(name)
            if old is not None:
                entries[name] = old  # as it was; a new file waits to be reported
            return True
        entries[name] = self._entry(name, rel, result, [f[0] for f in files[1:]])
        self._reported_keys[name] = result.key
        return True

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
                if name != _CONFIG_NAME:  # the queue configuration is not a task
                    names.add(name)
            elif not segments[-1].endswith(SIDECAR_SUFFIXES + EDITOR_SUFFIXES):
                return None  # a folder (or anything else) may hold or have held specs
        return names

    def _scan_names(self, names: set[str]) -> dict[str, SpecEntry] | None:
        """Re-read only `names` (and those still settling or briefly missing); None when a
        full walk is needed after all (a symlink appeared)."""
        names = names | set(self._missing_since)
        names |= {n for n, (key, _) in self._seen.items() if self._reported_keys.get(n) != key}
        now = self._clock()
        entries = dict(self._entries)
        parsed = dict(self._parsed)
        for name in names:
            files: list[tuple[str, str, Callable[[], os.stat_result]]] = []
            unreadable = False
            for suffix in TASK_SUFFIXES:
                rel = name + suffix
                path = os.path.join(self._top, rel)
                parsed.pop(path, None)
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
        return dict(entries)

    def _settling(self, name: str, parsed: _Parsed, now: float) -> bool:
        """Whether the file behind `name` changed too recently to be believed yet."""
        key = parsed.key
        if self.settle_seconds <= 0 or parsed.whole or key in self._whole:
            return False
        if not self._scanned:
            # Files older than the settle time were complete when serve started; a younger
            # one may be mid-write (written while serve was down, or just as it started).
            young = time.time_ns() - key[0] < self.settle_seconds * 1e9
            if young and self._unsettled(name, key, now):
                self._held.append(name)
                return True
            return False
        if self._reported_keys.get(name) == key:
            return False
        return self._unsettled(name, key, now)

    def _unsettled(self, name: str, key: StatKey, now: float) -> bool:
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
        with self._lock:
            if not (cached and self._statuses_read):
                self._statuses_read = True
                sidecars = self._read_sidecars()
                if sidecars is None:
                    self._sidecars = {}  # no status folder yet: nothing written so far
                    return {}, {}
                self._sidecars = sidecars
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

    def _array_status(
        self, array: str, index: int, status: TaskStatus | None, durable: bool
    ) -> bool:
        """Set (or with None forget) one element's status; write now unless in a batch."""
        held = self._arrays.setdefault(array, _ArraySidecar(None, b"", {}, {}))
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

    def write_status(self, name: str, status: TaskStatus, *, durable: bool = True) -> bool:
        """Write the sidecar atomically; False (and no write) if the bytes are unchanged.

        durable: fsynced, so it survives an OS crash (a write-ahead record: see
        reconciler/shell/writes.py). Either way it replaces a status waiting in defer_status.
        """
        element = arrays.split(name)
        if element is not None:
            with self._lock:
                return self._array_status(*element, status, durable)
        path = self.status_path(name)
        data = dump_status(status).encode()
        with self._lock:
            self._pending.pop(name, None)
            generation = next(self._generations)
            return self._write_sidecar(name, path, status, data, durable, generation)

    def _write_sidecar(
        self, name: str, path: Path, status: TaskStatus, data: bytes, durable: bool, generation: int
    ) -> bool:
        if self._links and self._crosses(path):
            # The sidecar's folder is a symlink into another team's: never write there (it
            # would be that team's status file). Kept in memory; the spec is Invalid anyway.
            self._sidecars[name] = _Sidecar((0, 0, 0), status, _digest(data), generation)
            return False
        key = _stat_key(path)
        if key is not None:
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
        write_atomic(path, data, durable=durable)
        key = _stat_key(path)
        if key is not None:
            self._sidecars[name] = _Sidecar(key, status, _digest(data), generation)
        return True

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
            held = self._pending.get(name)
            since = held.since if held is not None else self._clock()
            self._pending[name] = _Deferred(status, since, next(self._generations))

    def flush_statuses(self, budget: int, min_age: float) -> int:
        """Write up to `budget` deferred statuses, without fsync: first those with no sidecar
        yet (front of the queue first), then those deferred at least `min_age` seconds ago
        (the longest waiting first). Returns how many were written; a failed write stays
        deferred and is logged once."""
        with self._lock:
            if not self._pending:
                return 0
            now = self._clock()
            fresh: list[tuple[int, str]] = []
            stale: list[tuple[float, str]] = []
            for name, deferred in self._pending.items():
                if name not in self._sidecars:
                    position = deferred.status.status.queue_position
                    fresh.append((position if position is not None else 1 << 62, name))
                elif now - deferred.since >= min_age:
                    stale.append((deferred.since, name))
            fresh.sort()
            stale.sort()
            chosen = [n for _, n in fresh] + [n for _, n in stale]
            written = 0
            for name in chosen[:budget]:
                deferred = self._pending[name]
                status = deferred.status  # written as it was handed out: its generation stays
                try:
                    path = self.status_path(name)
                    data = dump_status(status).encode()
                    self._write_sidecar(name, path, status, data, False, deferred.generation)
                except OSError as exc:
                    self._warn_once(str(self.status_path(name)), f"cannot write: {exc.strerror}")
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
            self._sidecars.pop(name, None)
            self._pending.pop(name, None)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            if self.status_dir is not None:
                # The parallel tree is ours: prune folders it no longer needs.
                _prune_empty_parents(path.parent, self.status_dir)

    # --- internals -----------------------------------------------------------------------

    def _real_dir(self, directory: Path) -> str:
        """Resolve on every call: git-sync swaps the root symlink to a new worktree."""
        real = os.path.realpath(directory)
        try:
            st = os.stat(real)
        except FileNotFoundError as exc:
            raise FolderUnavailable(f"folder {directory} does not exist") from exc
        except OSError as exc:
            raise FolderUnavailable(f"folder {directory} is unreadable: {exc.strerror}") from exc
        if not stat.S_ISDIR(st.st_mode):
            raise FolderUnavailable(f"folder {directory} is not a directory")
        return real

    def _walk(self, top: str, accept: Callable[[str], bool], skip: tuple[int, int] | None) -> _Walk:
        """Iterative walk yielding accepted regular files; follows symlinks only within `top`."""
        walk = _Walk([], [])
        top_id = _dir_id(top)
        # (folder as walked, its relative path, ancestors, its real path if reached through a
        # symlink: then each file's real path is known without another system call)
        stack: list[tuple[str, str, frozenset[tuple[int, int] | None], str | None]] = [
            (top, "", frozenset({top_id}), None)
        ]
        visited = 0
        while stack:
            directory, rel, ancestors, real_dir = stack.pop()
            visited += 1
            if visited > MAX_DIRECTORIES:
                self._warn_once(top, f"more than {MAX_DIRECTORIES} folders; the rest is skipped")
                walk.unreadable.append(rel)
                continue
            try:
                with os.scandir(directory) as listing:
                    children = list(listing)
            except FileNotFoundError:
                if not rel:
                    raise FolderUnavailable(f"folder {top} disappeared") from None
                continue
            except OSError as exc:
                if not rel:
                    raise FolderUnavailable(f"folder {top} is unreadable: {exc.strerror}") from exc
                self._warn_once(directory, f"cannot list folder: {exc.strerror}")
                walk.unreadable.append(rel)
                continue
            for child in children:
                if child.name.startswith("."):
                    continue  # hidden: .git, .rayqueue, editor temp files, our temp files
                child_rel = rel + child.name
                try:
                    link = child.is_symlink()
                    walk.links = walk.links or link
                    real = None
                    if link:
                        real = os.path.realpath(child.path)
                        if not _inside(real, top):
                            self._warn_once(
                                child.path, "symlink points outside the folder; ignored"
                            )
                            continue
                    elif real_dir is not None:
                        real = os.path.join(real_dir, child.name)
                    if child.is_dir():
                        st = child.stat()
                        ident = (st.st_dev, st.st_ino)
                        if ident == skip:
                            continue
                        if ident in ancestors:
                            self._warn_once(child.path, "symlink loop; not followed")
                            continue
                        stack.append((child.path, child_rel + "/", ancestors | {ident}, real))
                    elif child.is_file() and accept(child.name):
                        walk.files.append((child_rel, child))
                        crossing = None if real is None else _crossing(child_rel, real, top)
                        if crossing is not None:
                            walk.crossings[child_rel] = crossing
                except FileNotFoundError:
                    continue  # deleted while we looked
                except OSError as exc:
                    self._warn_once(child.path, f"cannot read: {exc.strerror}")
                    walk.unreadable += [child_rel, child_rel + "/"]  # a file, or a folder
        return walk

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
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        cached = self._parsed.get(path)
        if cached is not None and cached.key == key:
            return cached
        parsed = self._parse_spec(rel, path, st, key, name)
        return None if parsed is None else replace(parsed, generation=next(self._generations))

    def _parse_spec(
        self, rel: str, path: str, st: os.stat_result, key: StatKey, name: str
    ) -> _Parsed | None:
        if st.st_size > MAX_FILE_BYTES:
            message = f"file is larger than the {MAX_FILE_BYTES // 1024} KiB limit"
            return _Parsed(key, None, SpecError(rel, None, None, None, message), "")
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
            return _Parsed(key, None, reserved, hashlib.sha256(data).hexdigest())
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
        return _Parsed(key, task, error, hashlib.sha256(data).hexdigest(), whole)

    def _entry(self, name: str, rel: str, result: _Parsed, others: list[str]) -> SpecEntry:
        task, error = result.task, result.error
        if others:
            # Names are the keys, so only one entry can stand; it carries the conflict.
            files = " and ".join([rel, *others])
            task, error = None, SpecError(rel, None, None, None, f"both {files} define task {name}")
        if task is not None:
            self._last_valid[name] = (task, result.generation)
        last = self._last_valid.get(name)
        basis = (result.generation, tuple(others), last[1] if last is not None else None, rel)
        last_task = last[0] if last is not None else None
        entry = SpecEntry(name, self.root / rel, task, error, last_task, result.raw_hash)
        return self._stamped(name, basis, entry)

    def _stamped(self, name: str, basis: tuple[object, ...], entry: SpecEntry) -> SpecEntry:
        """`entry` with a new generation, or the entry last reported for `name` (generation
        and all) when it was made of the same reads (`basis`)."""
        old = self._entries.get(name)
        if old is not None and self._basis.get(name) == basis:
            return old
        self._basis[name] = basis
        return replace(entry, generation=next(self._generations))

    def _load_sidecar(self, name: str, rel: str, entry: os.DirEntry[str]) -> _Sidecar | None:
        try:
            st = entry.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._warn_once(entry.path, f"cannot read sidecar: {exc.strerror}")
            raise _Unreadable from exc
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
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

    def _crosses(self, path: Path) -> bool:
        """Whether the sidecar `path` would land, through a symlinked folder, in another
        team folder than its name says (only possible when the last walk met a symlink)."""
        base = self.root if self.status_dir is None else self.status_dir
        rel = os.path.relpath(path, base).replace(os.sep, "/")
        real_base = os.path.realpath(base)
        real = os.path.join(os.path.realpath(path.parent), path.name)
        if not _inside(real, real_base):
            return True
        return _team(rel) != _team(os.path.relpath(real, real_base).replace(os.sep, "/"))

    def _check_inside(self, path: Path, name: str) -> None:
        root = os.path.realpath(self.root)
        if not _inside(os.path.realpath(path), root):
            raise InvalidName(f"task name {name!r} resolves outside the tasks folder")

    def _warn_once(self, path: str, message: str) -> None:
        if (path, message) not in self._warned:
            self._warned.add((path, message))
            log.warning("%s: %s", path, message)


# --- helpers -------------------------------------------------------------------------------


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


def _is_spec_file(filename: str) -> bool:
    if filename.endswith(EDITOR_SUFFIXES) or (filename.startswith("#") and filename.endswith("#")):
        return False
    if filename.endswith(SIDECAR_SUFFIXES):
        return False
    return filename.endswith(TASK_SUFFIXES) and _strip(filename, TASK_SUFFIXES) != ""


def _strip(rel: str, suffixes: Iterable[str]) -> str:
    for suffix in suffixes:
        if rel.endswith(suffix):
            return rel[: -len(suffix)]
    return rel


def _rel_of(entry: SpecEntry) -> str:
    return entry.name + entry.path.suffix


def _under_any(rel: str, prefixes: list[str]) -> bool:
    """`rel` is one of the unreadable files, or inside an unreadable "dir/" (or the root, "")."""
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) or p == "" for p in prefixes)


def _team(rel: str) -> str:
    """The team folder of a path relative to the root: its top-level folder ("" at the top)."""
    head, sep, _ = rel.partition("/")
    return head if sep else ""


def _crossing(rel: str, real: str, top: str) -> str | None:
    """Why the file at `rel`, really at `real` (inside `top`), is refused, or None: a symlink
    must not carry a spec from one team folder into another (it would run as the other's
    task, and both would share one status file)."""
    target = os.path.relpath(real, top).replace(os.sep, "/")
    here, there = _team(rel), _team(target)
    if here == there:
        return None

    def shown(team: str) -> str:
        return f"{team}/" if team else "the top folder"

    return (
        f"reached through a symlink from {shown(here)} into {shown(there)} ({rel} -> "
        f"{target}); a spec is never followed into another team's folder: copy it instead"
    )


def _inside(real_path: str, real_top: str) -> bool:
    return real_path == real_top or real_path.startswith(real_top.rstrip(os.sep) + os.sep)


def _dir_id(path: str | Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _stat_key(path: Path) -> StatKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _check_relative(name: str) -> None:
    """Path safety for any name, including scanned ones that validate_name would refuse."""
    if not name or "\x00" in name or name.startswith("/"):
        raise InvalidName(f"task name {name!r} is not a relative path")
    if any(segment in ("", ".", "..") for segment in name.split("/")):
        raise InvalidName(f"task name {name!r} must not contain empty, '.' or '..' segments")


def _digest(data: bytes) -> bytes:
    """What a sidecar's bytes are remembered by: 16 bytes, not ~500 (50,000 sidecars)."""
    return hashlib.blake2b(data, digest_size=16).digest()


def _is_whole(key: StatKey, after: os.stat_result) -> bool:
    """Whether bytes read from a file are its finished content, so that no settle wait is needed.

    Settling guards against reading a file while someone still writes it: an editor saving in
    place, `cp`, a shell appending piece by piece, git writing a checkout. Every such data
    write stamps the file's modification time and change time with the same instant, so
    between two pieces ctime == mtime. A writer that publishes a file whole does one more
    thing after its last write: it renames the finished file into place (our API and CLI via
    specs/atomic.py, git-sync, `mv`), or sets its mode or times (`install`, `cp -p`, tar).
    Those change only ctime, leaving ctime > mtime. So ctime > mtime means the last thing done
    to the file was not a data write: its content is complete. Equal times prove nothing and
    wait as before (a rename in the same clock tick as the write; write_atomic rules that out
    for our own writes). The stat is taken after reading and must still match the listing's,
    so the bytes read are the bytes this stat describes; a write that raced the read changes
    mtime (and sets ctime == mtime), and the file waits.
    """
    return (after.st_mtime_ns, after.st_size, after.st_ino) == key and (
        after.st_ctime_ns > after.st_mtime_ns
    )


def _read_regular(path: str | Path, limit: int = -1) -> bytes | None:
    """Read a regular file; None if missing or not regular."""
    read = _read_with_stat(path, limit)
    return None if read is None else read[0]


def _read_with_stat(path: str | Path, limit: int = -1) -> tuple[bytes, os.stat_result] | None:
    """Read a regular file and stat it after the read; None if missing or not regular.
    O_NONBLOCK: a FIFO never blocks us.

    At most `limit` bytes (if >= 0) are read, sized by fstat: a buffered read(limit) would
    allocate the whole limit for every small file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        chunks: list[bytes] = []
        total = 0
        want = st.st_size + 1  # one byte more, to see EOF (or growth) in the same call
        while limit < 0 or total < limit:
            chunk = os.read(fd, want if limit < 0 else min(want, limit - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            want = 1 << 16
        return b"".join(chunks), os.fstat(fd)
    finally:
        os.close(fd)


def _prune_empty_parents(directory: Path, stop: Path) -> None:
    while directory != stop and stop in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return  # not empty (or gone): stop climbing
        directory = directory.parent
