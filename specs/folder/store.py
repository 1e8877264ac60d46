"""The tasks folder as a database: specs in, status sidecars out.

A task is `<name>.yaml` (or `.yml`) under the root; its name is the relative path without the
extension. Sidecars are `<name>.status.yaml`, beside the spec or in a parallel `status_dir`.
Parsing is cached by (st_mtime_ns, st_size, st_ino), so a steady rescan costs one stat per file.

Every spec entry and every status the store hands out carries a generation: a number from one
counter that only grows (like Kubernetes' resourceVersion). A file read anew, an entry that
differs, a status written or deferred gets a new one; whatever is unchanged keeps its own. So
"unchanged since the last read" is one comparison of integers for the loop's caches.

`TaskStore` is the one lock around the parts it builds and owns: the folder lister
(listing.py), the scan of the specs (changes.py, reading files through specfiles.py), the
array entries and array sidecars (arrayfiles.py) and the status sidecars (statusfiles.py).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from specs.folder.arrayfiles import ArrayFiles, ElementEntries
from specs.folder.atomic import replace_file
from specs.folder.changes import ChangeScanner
from specs.folder.listing import FolderLister
from specs.folder.paths import (  # re-exported: callers import these from specs.folder.store
    MAX_NAME_LENGTH as MAX_NAME_LENGTH,
)
from specs.folder.paths import (
    SIDECAR_SUFFIXES as SIDECAR_SUFFIXES,
)
from specs.folder.paths import (
    TASK_SUFFIXES,
    ReadFile,
    StatKey,
    check_relative,
    read_with_stat,
)
from specs.folder.paths import (
    FolderSettling as FolderSettling,
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
from specs.folder.specfiles import IsWhole, ParseTask, SpecFiles, is_whole
from specs.folder.statusfiles import ParseStatus, StatusFiles, WriteFile
from specs.task import arrays
from specs.task.inputs import TaskInput
from specs.task.models import MAX_ARRAY_ELEMENTS
from specs.task.records import Task
from specs.task.status import TaskStatus, bounded
from specs.yamlio.parse import Problem, dump_status, parse_status, parse_task


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
        read_file: ReadFile = read_with_stat,
        write_file: WriteFile = replace_file,
        parse_task: ParseTask = parse_task,
        parse_status: ParseStatus = parse_status,
        is_whole: IsWhole = is_whole,
    ) -> None:
        """`settle_seconds`: how long a changed, new or vanished spec file must stay so before
        a scan reports it (0: at once). `check`: what a spec must also pass beyond its own
        file, given its task name. `max_array_elements`: a larger array reads as Invalid.

        How files are read (every read), sidecars written, specs and statuses parsed, and
        whether bytes read are a file's finished content: the real ones unless a test passes
        its own (a read that fails, a parser that counts)."""
        self.root = Path(root)
        self.status_dir = None if status_dir is None else Path(status_dir)
        self._lock = threading.Lock()
        generations = itertools.count(1)
        self._lister = FolderLister(self.root, self.status_dir)
        warn = self._lister.warn_once
        self._files = SpecFiles(
            self.root,
            check=check,
            max_array_elements=max_array_elements,
            generations=generations,
            warn=warn,
            read_file=read_file,
            parse_task=parse_task,
            is_whole=is_whole,
        )
        self._specs = ChangeScanner(
            self.root,
            self.status_dir,
            settle_seconds=settle_seconds,
            clock=clock,
            lister=self._lister,
            files=self._files,
            generations=generations,
        )
        self._elements = ElementEntries()
        sidecar_root = self.root if self.status_dir is None else self.status_dir
        self._arrays = ArrayFiles(
            sidecar_root, generations=generations, warn=warn, read_file=read_file
        )
        self._statuses = StatusFiles(
            self.root,
            self.status_dir,
            lister=self._lister,
            arrays=self._arrays,
            generations=generations,
            clock=clock,
            read_file=read_file,
            write_file=write_file,
            parse_status=parse_status,
        )
        self._read_file = read_file

    @property
    def settle_seconds(self) -> float:
        """How long a changed, new or vanished spec file must stay so before it is reported."""
        return self._specs.settle_seconds

    @settle_seconds.setter
    def settle_seconds(self, seconds: float) -> None:
        self._specs.settle_seconds = seconds

    @property
    def check(self) -> Callable[[str, Task], Sequence[Problem]] | None:
        """What a spec must also pass beyond its own file, given its task name."""
        return self._files.check

    @property
    def max_array_elements(self) -> int:
        """The setting max_array_elements: a larger array reads as Invalid."""
        return self._files.max_array_elements

    # --- specs ---------------------------------------------------------------------------

    def scan(self, changed: Iterable[str] | None = None) -> dict[str, TaskInput]:
        """Every task file under the root, parsed (or taken from the cache if unchanged).

        `changed`: the paths file events named since the last scan. Only those, and names
        still settling, are looked at then; anything the events cannot describe exactly (a
        folder, a symlink anywhere in the tree, the root swapped to a new target) falls back
        to a full walk. None: a full walk.
        """
        return self.scan_changes(changed)[0]

    def scan_changes(
        self, changed: Iterable[str] | None = None
    ) -> tuple[dict[str, TaskInput], set[str] | None]:
        """scan(changed), and the task names whose entry may differ from the last scan's
        (array elements by their own names); None after a full walk: any may. For the one
        reader that scans this store (the loop; others beside it use `scanned`)."""
        with self._lock:
            specs = self._specs
            names = None if changed is None else specs.names_of(changed)
            if names is not None:
                entries = specs.scan_names(names)
                if entries is not None:
                    return self._elements.expand(entries, specs.looked_at)
            return self._elements.expand(specs.scan_all())

    def still(self) -> bool:
        """Whether a scan that events name nothing for would read nothing either: no file is
        settling or briefly missing, the tree holds no symlink, and the root still points
        where it did (git-sync swaps it). The loop skips a pass only then."""
        with self._lock:
            return self._specs.still()

    def scanned(self) -> dict[str, TaskInput] | None:
        """What the last scan returned, without reading anything; None before the first full
        scan. For a reader beside the loop (the HTTP API in `serve`) that must neither walk
        the folder nor disturb the loop's own scans."""
        with self._lock:
            if not self._specs.walked:
                return None
            return self._elements.shown(self._specs.entries)

    def mark_whole(self, keys: Iterable[StatKey]) -> None:
        """Files with these stat keys are complete (a watcher saw their writer close them, or
        a rename put them in place): read them without waiting out the settle time. A later
        write changes the key, and the file settles again."""
        with self._lock:
            self._specs.mark_whole(keys)

    def spec_path(self, name: str) -> Path:
        """The existing `name.yaml` or `name.yml`, else where `name.yaml` would go."""
        validate_name(name)
        candidates = [self.root / f"{name}{suffix}" for suffix in TASK_SUFFIXES]
        path = next((p for p in candidates if p.exists()), candidates[0])
        self._lister.check_inside(path, name)
        return path

    def read_spec_text(self, name: str) -> bytes | None:
        """The spec's bytes, or None if there is no such (regular) file."""
        read = self._read_file(self.spec_path(name), -1)
        return None if read is None else read[0]

    def delete_spec(self, name: str) -> bool:
        """Remove every file that defines the task (.yaml and .yml); True if any existed."""
        validate_name(name)
        removed = False
        for suffix in TASK_SUFFIXES:
            path = self.root / f"{name}{suffix}"
            self._lister.check_inside(path, name)
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
        return self._statuses.path(name)

    def status_file(self, name: str) -> Path:
        """The file that holds the status of `name`: its sidecar, or for an element of a task
        array, the array's one sidecar."""
        element = arrays.split(name)
        return self._statuses.path(name) if element is None else self._arrays.path(element[0])

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
            statuses, generations, _ = self._statuses.read_view(
                cached, consume=False, entries=self._specs.entries
            )
        return statuses, generations

    def read_status_changes(
        self, *, cached: bool = False
    ) -> tuple[dict[str, TaskStatus], dict[str, int], set[str] | None]:
        """read_statuses_versioned, and the names whose status may differ from what the last
        call of this method handed out (None: any may). For the one reader that follows
        every change (the loop); others use read_statuses. A cached read costs what changed:
        the mapping handed out is kept, updated by this store's writes, defers and deletes."""
        with self._lock:
            return self._statuses.read_view(cached, consume=True, entries=self._specs.entries)

    def write_status(self, name: str, status: TaskStatus, *, durable: bool = True) -> bool:
        """Write the sidecar atomically; False (and no write) if the bytes are unchanged.

        durable: fsynced, so it survives an OS crash (a write-ahead record: see
        reconciler/shell/loop/writes.py). Either way it replaces a status waiting in defer_status.
        """
        status = bounded(status)  # every field within its cap, before it is held or written
        element = arrays.split(name)
        if element is not None:
            with self._lock:
                return self._statuses.set_element(*element, status, durable)
        path = self._statuses.path(name)
        data = dump_status(status).encode()
        with self._lock:
            return self._statuses.write(name, path, status, data, durable, self._specs.links)

    def defer_status(self, name: str, status: TaskStatus) -> None:
        """Keep `status` to be written by a later flush_statuses; read_statuses returns it
        meanwhile. Only for what the next process could derive again: it is lost with us."""
        check_relative(name)
        status = bounded(status)  # as write_status: what is held is what will be written
        element = arrays.split(name)
        with self._lock:
            if element is not None:  # an element's derived fields are never written anyway
                self._statuses.set_element(*element, status, False)
            else:
                self._statuses.defer(name, status)

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
            return self._statuses.flush(budget, min_age, self._specs.links)

    @property
    def deferred_statuses(self) -> int:
        """How many statuses wait for flush_statuses."""
        return self._statuses.deferred

    def delete_status(self, name: str) -> None:
        """Remove the sidecar; a missing one is fine."""
        element = arrays.split(name)
        if element is not None:
            with self._lock:
                self._statuses.set_element(*element, None, False)
            return
        path = self._statuses.path(name)
        with self._lock:
            self._statuses.delete(name, path)

    # --- arrays ----------------------------------------------------------------------------

    def read_array(self, array: str) -> dict[int, TaskStatus]:
        """The element statuses of one array, by index: what this store holds, else its
        sidecar on disk (empty when there is none or it is unreadable)."""
        with self._lock:
            held = self._arrays.held.get(array)
            if held is not None:
                return dict(held.elements)
        return self._arrays.read_disk(array)

    @contextlib.contextmanager
    def batch(self) -> Iterator[set[str]]:
        """Statuses of array elements written inside are written once per array at the end
        (fsynced if any of them asked to be): a pass changes many elements at once. The set
        yielded holds, after the block, the elements whose sidecar could not be written."""
        failed: set[str] = set()
        with self._lock:
            self._statuses.begin_batch()
        try:
            yield failed
        finally:
            with self._lock:
                failed |= self._statuses.end_batch()
