"""What the routes do to the tasks folder: read specs and sidecars, and write specs safely.

Every write goes through here: it validates with the same parser the reconciler uses, holds a
per-task lock around read-check-write (so two requests on one task never interleave), checks
If-Match against the hash of the file's bytes, writes atomically, and wakes the loop.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api.errors import Conflict, NotFound, Unprocessable, spec_errors
from reconciler.loop import Reconciler
from specs.atomic import write_atomic
from specs.cluster import RayAdapter
from specs.models import Task, TaskStatus
from specs.parse import MAX_FILE_BYTES, SpecError, SpecParseError, parse_status, parse_task
from specs.settings import Settings
from specs.store import FolderUnavailable, TaskStore, validate_name
from specs.yamledit import load_document, patch_text

_LOCK_STRIPES = 64  # bounded memory however many names are used; collisions only serialize


@dataclass(frozen=True)
class SpecFile:
    """One spec file as read now, with its validation result."""

    name: str
    path: Path
    data: bytes
    task: Task | None
    errors: list[SpecError] = field(default_factory=list)

    @property
    def etag(self) -> str:
        # The same hash the store keeps as SpecEntry.raw_hash: sha256 of the bytes on disk.
        return hashlib.sha256(self.data).hexdigest()

    @property
    def text(self) -> str:
        return self.data.decode("utf-8-sig")

    def document(self) -> dict[str, Any] | None:
        """The file's data as written (not normalized), only for files that parsed."""
        if self.task is None:
            return None
        data = load_document(self.text)
        return data if isinstance(data, dict) else None


def quote_etag(etag: str) -> str:
    return f'"{etag}"'


def etag_matches(header: str, etag: str | None) -> bool:
    """If-Match semantics: `*` matches any existing file; weak or strong, quoted or bare."""
    for raw in header.split(","):
        candidate = raw.strip()
        if candidate == "*":
            return etag is not None
        candidate = candidate.removeprefix("W/").strip('"')
        if etag is not None and candidate == etag:
            return True
    return False


class TaskService:
    def __init__(
        self,
        settings: Settings,
        store: TaskStore,
        *,
        reconciler: Reconciler | None,
        ray: RayAdapter | None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.reconciler = reconciler
        self.ray = ray if ray is not None else (reconciler.ray if reconciler else None)
        # Ages are measured on the loop's clock, the one that stamped queuedAt.
        self.clock = clock or (reconciler.clock if reconciler is not None else time.time)
        self._locks = [threading.Lock() for _ in range(_LOCK_STRIPES)]

    # --- reading --------------------------------------------------------------------------

    @contextmanager
    def lock(self, name: str) -> Iterator[None]:
        digest = hashlib.blake2b(name.encode(), digest_size=4).digest()
        with self._locks[int.from_bytes(digest) % _LOCK_STRIPES]:
            yield

    def rel(self, name: str, path: Path | None = None) -> str:
        suffix = path.suffix if path is not None else ".yaml"
        return f"{name}{suffix}"

    def read(self, name: str) -> SpecFile | None:
        """The spec `name` now, or None. Raises InvalidName for names we refuse."""
        path = self.store.spec_path(name)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        rel = self.rel(name, path)
        if st.st_size > MAX_FILE_BYTES:
            message = f"file is larger than the {MAX_FILE_BYTES // 1024} KiB limit"
            return SpecFile(name, path, b"", None, [SpecError(rel, None, None, None, message)])
        data = self.store.read_spec_text(name)
        if data is None:
            return None
        stem = name.rsplit("/", 1)[-1]
        try:
            task = parse_task(data, file=rel, expected_name=stem)
        except SpecParseError as exc:
            return SpecFile(name, path, data, None, exc.errors)
        return SpecFile(name, path, data, task)

    def require(self, name: str) -> SpecFile:
        spec = self.read(name)
        if spec is None:
            raise NotFound(f"no task {name}")
        return spec

    def status(self, name: str) -> TaskStatus | None:
        """The reconciler's sidecar for `name`; unreadable counts as absent, as in the store."""
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

    # --- writing --------------------------------------------------------------------------

    def put(
        self,
        name: str,
        data: bytes,
        *,
        from_json: bool,
        if_match: str | None,
        if_none_match: str | None,
    ) -> tuple[SpecFile, bool]:
        """Create or replace; returns (the spec now, created?)."""
        path = self.store.spec_path(name)
        self.validate(name, data, path=path, with_position=not from_json)
        with self.lock(name):
            current = self.read(name)
            self._preconditions(name, current, if_match, if_none_match)
            if current is not None and current.data == data:
                return current, False  # no rewrite, no mtime churn for the watcher
            self._write(path, data)
        return self.require(name), current is None

    def create(self, name: str, data: bytes) -> SpecFile:
        """Create a new spec; 409 if the name is taken."""
        path = self.store.spec_path(name)
        self.validate(name, data, path=path, with_position=False)
        with self.lock(name):
            if self.read(name) is not None:
                raise Conflict(f"task {name} already exists")
            self._write(path, data)
        return self.require(name)

    def patch(
        self, name: str, patch: Mapping[str, Any], *, if_match: str | None = None
    ) -> SpecFile:
        """RFC 7386 merge patch of the spec document, validated before it is written."""
        with self.lock(name):
            current = self.require(name)
            self._preconditions(name, current, if_match, None)
            document = current.document()
            if current.task is None or document is None:
                problems = "; ".join(str(e) for e in current.errors) or "not a mapping"
                raise Conflict(
                    f"the spec file of {name} is invalid ({problems}); replace it with PUT or "
                    "delete it"
                )
            text, _ = patch_text(current.text, document, dict(patch))
            if text == current.text:
                return current
            data = text.encode()
            self.validate(name, data, path=current.path, with_position=False)
            self._write(current.path, data)
        return self.require(name)

    def delete(self, name: str, *, if_match: str | None = None) -> SpecFile:
        with self.lock(name):
            current = self.require(name)
            self._preconditions(name, current, if_match, None)
            self.store.delete_spec(name)
        self.wake()
        return current

    def validate(self, name: str, data: bytes, *, path: Path, with_position: bool) -> Task:
        stem = name.rsplit("/", 1)[-1]
        try:
            return parse_task(data, file=self.rel(name, path), expected_name=stem)
        except SpecParseError as exc:
            raise Unprocessable(spec_errors(exc.errors, with_position=with_position)) from None

    def wake(self) -> None:
        # The watcher would notice the file too; this makes the reaction immediate.
        if self.reconciler is not None:
            self.reconciler.wake.set()

    def _preconditions(
        self, name: str, current: SpecFile | None, if_match: str | None, if_none_match: str | None
    ) -> None:
        etag = current.etag if current is not None else None
        if if_match is not None and not etag_matches(if_match, etag):
            if current is None:
                raise Conflict(f"If-Match given, but task {name} does not exist")
            raise Conflict(f"task {name} has changed: its hash is {etag}, not {if_match}")
        if if_none_match is not None and etag_matches(if_none_match, etag):
            raise Conflict(f"task {name} already exists")

    def _write(self, path: Path, data: bytes) -> None:
        root = self.store.root
        if not root.is_dir():
            # Never recreate a vanished (unmounted?) folder: the loop waits for it to return.
            raise FolderUnavailable(f"folder {root} does not exist")
        write_atomic(path, data)
        self.wake()

    # --- legacy ids -----------------------------------------------------------------------

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
            if spec is not None and spec.task and spec.task.spec.submission_id == task_id:
                return file_name
        for name, entry in self.store.scan().items():
            task = entry.task or entry.last_valid
            if task is not None and task.spec.submission_id == task_id:
                return name
        return None
