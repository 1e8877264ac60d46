"""The tasks folder as a service, for the CLI and the HTTP API alike: query, read and edit.

Query: list tasks in queue order, filtered by phase and label selector. Edit: create, replace,
merge-patch and delete spec files. Every write validates with the reconciler's own parser,
holds a per-task lock around read-check-write (two requests on one task never interleave),
checks If-Match against the hash of the file's bytes, re-reads the file just before writing
(another process may have written it meanwhile), writes atomically, and calls `on_write` so
a loop in the same process reacts at once.

Beside a loop in the same process (`rayqueue serve`), the service reads the loop's own store:
a listing is the loop's last scan and the statuses it holds (queue positions and estimates not
yet written to disk included), with no walk of the folder; the tasks this service wrote since
that scan are read from their files, so a caller sees its own writes at once. One task's spec
is always read from its file.

The errors are this module's own (specs/service/errors.py); each front end turns them into its
words (an exit code and a line on stderr, or an HTTP status and a JSON detail).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from specs.cluster import META_QUEUE, META_TASK, RayJob
from specs.folder.atomic import write_atomic
from specs.folder.store import (
    SIDECAR_SUFFIXES,
    FolderUnavailable,
    InvalidName,
    TaskStore,
    validate_name,
)
from specs.queues.bounds import Bounded
from specs.queues.config import CONFIG_FILE as QUEUES_FILE
from specs.queues.parse import parse_queue_config
from specs.queues.tree import check_sub_queue_edit
from specs.service.errors import (
    ConfigRejected,
    Conflict,
    IdUser,
    QueryError,
    SpecBroken,
    SpecForbidden,
    SpecRejected,
    TaskNotFound,
)
from specs.service.etags import check_preconditions, etag_matches, quote_etag
from specs.service.query import Requirement, parse_phases, parse_selector, select
from specs.service.views import SpecFile, TaskView
from specs.task import arrays, submission_ids
from specs.task.errors import SpecError
from specs.task.inputs import TaskInput
from specs.task.models import Reason
from specs.task.records import Task
from specs.task.status import TaskStatus
from specs.tenancy.runtimepaths import PathProblem
from specs.yamlio.depth import TooDeep, check_nesting
from specs.yamlio.mergepatch import load_document, patch_text
from specs.yamlio.parse import MAX_FILE_BYTES, SpecParseError, parse_status, parse_task

WRITTEN_BY = "rayqueue/written-by"  # the API's caller (a token name) that last wrote a spec
# The legacy API's task id, when it is not a valid submission id as it is (a name with spaces):
# the spec then runs under a cleaned id, and the legacy endpoints find the task by this.
LEGACY_TASK_ID = "rayqueue/legacyTaskId"
_LOCK_STRIPES = 64  # bounded memory however many names are used; collisions only serialize
_ATTEMPTS = 5  # re-reads when another process changes the file under us
_CONFIG_FILE = re.compile(r"_[A-Za-z0-9._-]{1,100}\.ya?ml")

Check = Callable[[str, Task, Task | None], None]
"""A caller's own rule on a write: (the task's name, the new spec, the one it replaces or
None); raises to refuse. Called after validation and before anything is written (the API's
token policy and its submission-id claims)."""

WriterCheck = Callable[[Task], Sequence[PathProblem]]
"""What one writer may not put in a spec (specs.tenancy.runtimepaths.RuntimePaths.writer_check); run
during validation so a problem names its line."""


@dataclass(frozen=True)
class ConfigWritten:
    """A configuration file written: whether it is new, and what a team's own queue file asked
    beyond its parent (each `file:line:column: field: message`; bounded, not refused)."""

    created: bool
    warnings: tuple[str, ...] = ()


# --- the service -------------------------------------------------------------------------------


class TaskService:
    def __init__(
        self,
        store: TaskStore,
        *,
        on_write: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
        loop_store: bool = False,
    ) -> None:
        """`loop_store`: `store` is a running loop's, which scans it; read what it last read
        rather than walk the folder (see the module's docstring)."""
        self.store = store
        self.on_write = on_write
        self.clock = clock  # ages are measured on the loop's clock, the one that stamps queuedAt
        self.loop_store = loop_store
        self._locks = [threading.Lock() for _ in range(_LOCK_STRIPES)]
        self._own_lock = threading.Lock()
        self._own_writes: set[str] = set()  # tasks written here that the loop may not have read
        self._before_loop: TaskStore | None = None  # walks the folder until the loop has

    # --- reading ------------------------------------------------------------------------------

    def views(self) -> list[TaskView]:
        """Every task in the folder with its sidecar, in queue order. FolderUnavailable if the
        folder is gone."""
        entries = self.entries()
        statuses = self.statuses()
        views = [TaskView(read, statuses.get(name)) for name, read in entries.items()]
        return sorted(views, key=TaskView.sort_key)

    def entries(self) -> dict[str, TaskInput]:
        """Every task in the folder by name: a scan of the folder; beside a loop, the loop's
        last scan with this service's own later writes read from their files."""
        if not self.loop_store:
            return self.store.scan()
        entries = self.store.scanned()
        if entries is None:
            return self._walker().scan()  # the loop has not read the folder yet
        if not self.store.root.is_dir():
            raise FolderUnavailable(f"folder {self.store.root} does not exist")
        with self._own_lock:
            own = sorted(self._own_writes)
        for name in own:
            spec = self.read(name)
            entry = entries.get(name)
            if (spec is None and entry is None) or (
                spec is not None and entry is not None and entry.raw_hash == spec.etag
            ):
                with self._own_lock:
                    self._own_writes.discard(name)  # the loop has read it as it is now
            elif spec is None:
                del entries[name]
            else:
                error = spec.errors[0] if spec.errors else None
                last_valid = spec.task or (entry.last_valid if entry is not None else None)
                entries[name] = TaskInput(
                    name, spec.task, error, last_valid, base=spec.path, raw_hash=spec.etag
                )
        return entries

    def statuses(self) -> dict[str, TaskStatus]:
        """Every sidecar by task name; beside a loop, the statuses it holds (some may not be
        on disk yet), read without a walk."""
        if not self.loop_store:
            return self.store.read_statuses()
        if self.store.scanned() is None:
            return self._walker().read_statuses()
        return self.store.read_statuses(cached=True)

    def _walker(self) -> TaskStore:
        """A store of our own over the loop's folder, read only until the loop's first scan."""
        if self._before_loop is None:
            store = self.store
            self._before_loop = TaskStore(
                store.root,
                store.status_dir,
                check=store.check,
                max_array_elements=store.max_array_elements,
            )
        return self._before_loop

    def _wrote(self, name: str) -> None:
        if self.loop_store:
            with self._own_lock:
                self._own_writes.add(name)

    @contextmanager
    def lock(self, name: str) -> Iterator[None]:
        digest = hashlib.blake2b(name.encode(), digest_size=4).digest()
        with self._locks[int.from_bytes(digest) % _LOCK_STRIPES]:
            yield

    def read(self, name: str) -> SpecFile | None:
        """The spec `name` now, or None. Raises InvalidName for names we refuse."""
        path = self.store.spec_path(name)
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        rel = _rel(name, path)
        if st.st_size > MAX_FILE_BYTES:
            message = f"file is larger than the {MAX_FILE_BYTES // 1024} KiB limit"
            return SpecFile(name, path, b"", None, [SpecError(rel, None, None, None, message)])
        data = self.store.read_spec_text(name)
        if data is None:
            return None
        try:
            task = parse_task(data, file=rel, expected_name=_stem(name), task_name=name)
        except SpecParseError as exc:
            return SpecFile(name, path, data, None, exc.errors)
        return SpecFile(name, path, data, task)

    def elements(self, array: str) -> dict[int, TaskStatus]:
        """The statuses of an array's elements, by index (none seen yet: empty)."""
        if self.loop_store and self.store.scanned() is not None:
            statuses = self.store.read_statuses(cached=True)
            found = ((arrays.split(n), s) for n, s in statuses.items())
            return {p[1]: s for p, s in found if p is not None and p[0] == array}
        return self.store.read_array(array)

    def require(self, name: str) -> SpecFile:
        spec = self.read(name)
        if spec is None:
            raise TaskNotFound(name)
        return spec

    def status(self, name: str) -> TaskStatus | None:
        """The reconciler's sidecar for `name`; unreadable counts as absent, as in the store.
        Beside a loop, the status it holds (a queue position not yet on disk included)."""
        if self.loop_store and self.store.scanned() is not None:
            return self.store.read_statuses(cached=True).get(name)
        element = arrays.split(name)
        if element is not None:  # one of an array's, in the array's one sidecar
            return self.store.read_array(element[0]).get(element[1])
        path = self.store.status_path(name)
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                return None
            data = path.read_bytes()
        except OSError:
            return None
        try:
            return parse_status(data, file=str(path.name))
        except SpecParseError:
            return None

    # --- writing ------------------------------------------------------------------------------

    def put(
        self,
        name: str,
        data: bytes,
        *,
        from_json: bool,
        if_match: str | None,
        if_none_match: str | None,
        author: str | None = None,
        check: Check | None = None,
        paths: WriterCheck | None = None,
    ) -> tuple[SpecFile, bool]:
        """Create or replace; returns (the spec now, created?). With `author`, the written spec
        carries it in the annotation rayqueue/written-by (whatever the body said). `check`
        sees the spec before it is written and may refuse it (raise); `paths`: the local
        paths this writer may not name (SpecForbidden)."""
        path = self.store.spec_path(name)
        task = self.validate(name, data, path=path, with_position=not from_json, check=paths)
        data = self._stamped(name, data, path, author)
        with self.lock(name):
            current = self.read(name)
            check_preconditions(name, current, if_match, if_none_match)
            if current is not None and current.data == data:
                return current, False  # no rewrite, no mtime churn for the watcher
            if check is not None:
                check(name, task, current.task if current is not None else None)
            self._write(path, data, name)
        return self.require(name), current is None

    def create(
        self,
        name: str,
        data: bytes,
        *,
        author: str | None = None,
        check: Check | None = None,
        paths: WriterCheck | None = None,
    ) -> SpecFile:
        """Create a new spec; Conflict if the name is taken."""
        path = self.store.spec_path(name)
        task = self.validate(name, data, path=path, with_position=False, check=paths)
        data = self._stamped(name, data, path, author)
        with self.lock(name):
            if self.read(name) is not None:
                raise Conflict(f"task {name} already exists")
            if check is not None:
                check(name, task, None)
            self._write(path, data, name)
        return self.require(name)

    def patch(
        self,
        name: str,
        patch: Mapping[str, Any],
        *,
        if_match: str | None = None,
        done: Callable[[Task], bool] | None = None,
        author: str | None = None,
        check: Check | None = None,
        paths: WriterCheck | None = None,
    ) -> tuple[SpecFile, bool]:
        """RFC 7386 merge patch of the spec document, validated before it is written; returns
        (the spec now, changed?). Only the values that change are edited in the text, so
        comments and layout survive. `done(task)` true: already as wanted, nothing is written.
        """
        with self.lock(name):
            for _ in range(_ATTEMPTS):
                current = self.require(name)
                check_preconditions(name, current, if_match, None)
                document = current.document()
                if current.task is None or document is None:
                    raise SpecBroken(name, current.errors)
                if done is not None and done(current.task):
                    return current, False
                text, patched = patch_text(current.text, document, dict(patch))
                if text == current.text:
                    return current, False
                data = text.encode()
                task = self.validate(
                    name, data, path=current.path, with_position=False, check=paths
                )
                if check is not None:
                    check(name, task, current.task)
                if author is not None and isinstance(patched, dict):
                    # Only a real change is signed, so a no-op patch still writes nothing.
                    text, _ = patch_text(text, patched, _signature(author))
                    data = text.encode()
                    self.validate(name, data, path=current.path, with_position=False)
                if self.store.read_spec_text(name) != current.data:
                    continue  # another process wrote meanwhile: start over from its version
                self._write(current.path, data, name)
                return self.require(name), True
        raise Conflict(f"the spec of {name} keeps changing; try again")

    def delete(self, name: str, *, if_match: str | None = None) -> SpecFile:
        with self.lock(name):
            current = self.require(name)
            check_preconditions(name, current, if_match, None)
            self.store.delete_spec(name)
            self._wrote(name)
        self._written()
        return current

    def validate(
        self,
        name: str,
        data: bytes,
        *,
        path: Path,
        with_position: bool,
        check: WriterCheck | None = None,
    ) -> Task:
        forbidden = False

        def pinned(task: Task) -> list[tuple[tuple[str | int, ...], str]]:
            nonlocal forbidden
            assert check is not None
            problems = check(task)
            forbidden = any(p.forbidden for p in problems)
            return [(p.loc, p.message) for p in problems]

        try:
            return parse_task(
                data,
                file=_rel(name, path),
                expected_name=_stem(name),
                task_name=name,
                check=pinned if check is not None else None,
                max_array_elements=self.store.max_array_elements,
            )
        except SpecParseError as exc:
            kind = SpecForbidden if forbidden else SpecRejected
            raise kind(name, exc.errors, with_position=with_position) from None

    def _stamped(self, name: str, data: bytes, path: Path, author: str | None) -> bytes:
        """`data` (already validated) with the written-by annotation set to `author`."""
        if author is None:
            return data
        text = data.decode()
        document = load_document(text)
        if not isinstance(document, dict):
            return data  # cannot happen after validation; nothing to sign
        signed, _ = patch_text(text, document, _signature(author))
        result = signed.encode()
        self.validate(name, result, path=path, with_position=False)
        return result

    def _write(self, path: Path, data: bytes, task: str | None = None) -> None:
        root = self.store.root
        if not root.is_dir():
            # Never recreate a vanished (unmounted?) folder: the loop waits for it to return.
            raise FolderUnavailable(f"folder {root} does not exist")
        write_atomic(path, data)
        if task is not None:
            self._wrote(task)
        self._written()

    def _written(self) -> None:
        # The watcher would notice the file too; this makes the reaction immediate.
        if self.on_write is not None:
            self.on_write()

    # --- configuration files ------------------------------------------------------------------

    def config_path(self, file: str) -> Path:
        """Where the top-level configuration file `file` (`_queues.yaml`) lives, or a queue's
        own `team-a/_queues.yaml` (nested queues); InvalidName for anything else, so this never
        reaches a task or a sidecar."""
        folder, _, base = file.rpartition("/")
        if folder:
            if base != QUEUES_FILE:
                raise InvalidName(f"{file!r}: under a folder, only {QUEUES_FILE} is configuration")
            validate_name(folder)  # no '..', no hidden or empty segments
            path = self.store.root / folder / base
            root = os.path.realpath(self.store.root)
            if not os.path.realpath(path).startswith(root.rstrip(os.sep) + os.sep):
                raise InvalidName(f"{file!r} resolves outside the tasks folder")
            return path
        if not _CONFIG_FILE.fullmatch(file) or file.endswith(SIDECAR_SUFFIXES):
            raise InvalidName(
                f"{file!r} is not a configuration file name: '_' first, letters, digits, "
                "'.', '_' or '-', ending in .yaml or .yml"
            )
        path = self.store.root / file
        root = os.path.realpath(self.store.root)
        if os.path.dirname(os.path.realpath(path)) != root:
            raise InvalidName(f"{file!r} resolves outside the tasks folder")
        return path

    def read_config(self, file: str) -> bytes | None:
        path = self.config_path(file)
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
                return None
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write_config(self, file: str, data: bytes) -> ConfigWritten:
        """Write a configuration file. `_queues.yaml` is checked as the loop will read it;
        other names only as a YAML mapping."""
        path = self.config_path(file)
        try:
            check_nesting(data)  # before parsing: a nesting bomb costs a scan, not a parse
            document = yaml.safe_load(data)
        except TooDeep as exc:
            raise ConfigRejected(f"{file}: {exc}") from None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ConfigRejected(f"{file} is not valid YAML: {exc}") from None
        if not isinstance(document, dict):
            raise ConfigRejected(f"{file} must be a YAML mapping")
        bounded: list[Bounded] = []
        if file == QUEUES_FILE:
            parse_queue_config(data, file=file)  # SpecParseError names line and field
        elif file.endswith("/" + QUEUES_FILE):
            bounded = self._check_sub_queues(file, data)
        with self.lock(file):
            existed = os.path.lexists(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._write(path, data)
        return ConfigWritten(not existed, tuple(str(item.note) for item in bounded))

    def _check_sub_queues(self, file: str, data: bytes) -> list[Bounded]:
        """A queue's own file, checked alone and inside the tree as the loop will read it;
        the fields it asks beyond what its parent grants (bounded, not refused)."""
        return check_sub_queue_edit(self.store.root, self.read_config(QUEUES_FILE), file, data)

    def delete_config(self, file: str) -> None:
        path = self.config_path(file)
        with self.lock(file):
            try:
                path.unlink()
            except FileNotFoundError:
                raise TaskNotFound(file) from None
        self._written()

    # --- legacy ids ---------------------------------------------------------------------------

    def find_by_task_id(self, task_id: str, file_name: str | None) -> str | None:
        """The task whose first run is `task_id` (a legacy id), or whose name it is."""
        try:
            if self.read(validate_name(task_id)) is not None:
                return task_id
        except ValueError:  # InvalidName: not a name, so only an id
            pass
        if file_name and file_name != task_id:
            # Where /add_task put it when the id is not a valid name; the id must match, so
            # a cleaned-up lookalike never points at some other task.
            spec = self.read(file_name)
            if spec is not None and spec.task and _has_task_id(spec.task, task_id):
                return file_name
        for name, entry in self.entries().items():
            task = entry.task or entry.last_valid
            if task is not None and _has_task_id(task, task_id):
                return name
        return None

    # --- submission ids -----------------------------------------------------------------------

    def submission_id_user(
        self,
        name: str,
        sid: str,
        jobs: Mapping[str, RayJob] | None = None,
        queue_id: str | None = None,
    ) -> IdUser | None:
        """Who other than task `name` has the explicit submission id `sid`, or None: another
        spec that names it, a sidecar that records a run under it, or a Ray job holding it
        (`jobs`, as the loop last saw them; ours when their queue is `queue_id`). Ids that
        one's later runs would reach count too (`x` and `x-2`)."""

        def related(other: str) -> bool:
            return submission_ids.uses(other, sid) or submission_ids.uses(sid, other)

        for other, entry in sorted(self.entries().items()):
            task = entry.task or entry.last_valid
            claim = task.spec.submission_id if task is not None else None
            if other != name and claim and related(claim):
                return IdUser(other)
        for other, status in sorted(self.statuses().items()):
            body = status.status
            if (
                other != name
                and body.submission_id
                and body.reason != Reason.SUBMISSION_ID_CONFLICT  # never ran under it
                and related(body.submission_id)
            ):
                return IdUser(other)
        for job_id, job in sorted((jobs or {}).items()):
            if not related(job_id):
                continue
            ours = queue_id is not None and job.metadata.get(META_QUEUE) == queue_id
            owner = job.metadata.get(META_TASK) if ours else None
            if owner != name:
                return IdUser(owner or None)
        return None


def _has_task_id(task: Task, task_id: str) -> bool:
    """Whether the legacy API's id `task_id` names this task: its first run's id, or the legacy
    id kept beside a cleaned one."""
    return (
        task.spec.submission_id == task_id
        or task.metadata.annotations.get(LEGACY_TASK_ID) == task_id
    )


def _signature(author: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {WRITTEN_BY: author}}}


def _rel(name: str, path: Path | None = None) -> str:
    return f"{name}{path.suffix if path is not None else '.yaml'}"


def _stem(name: str) -> str:
    return name.rsplit("/", 1)[-1]


__all__ = [
    "LEGACY_TASK_ID",
    "WRITTEN_BY",
    "Check",
    "ConfigRejected",
    "Conflict",
    "IdUser",
    "QueryError",
    "Requirement",
    "SpecBroken",
    "SpecForbidden",
    "SpecRejected",
    "TaskNotFound",
    "TaskService",
    "etag_matches",
    "parse_phases",
    "parse_selector",
    "quote_etag",
    "select",
]
