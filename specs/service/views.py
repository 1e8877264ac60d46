"""How a task is shown, by the CLI and the HTTP API alike: times, ages, resources, the phase
of a task the loop has not seen yet, the queue order, and the task as one document.

Pure: no I/O but a stat for the age of a file the loop has not queued yet.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specs.task.arrays import order_key
from specs.task.errors import SpecError
from specs.task.inputs import TaskInput
from specs.task.models import API_VERSION, ConditionType, Phase, Reason
from specs.task.quantity import format_memory
from specs.task.records import Task
from specs.task.status import TaskStatus, TaskStatusBody
from specs.yamlio.mergepatch import load_document

NOT_SEEN = "-"  # the CLI's phase column of a task the reconciler has not written a status for
NOT_SEEN_MESSAGE = "not yet seen by the reconciler (is `rayqueue serve` running?)"
API_NOT_SEEN_MESSAGE = "the reconciler has not seen this task yet"

# Queue order, in groups: what runs now, what runs next, what is held back, what is broken,
# what is done. Within a group: priority high to low, then queuedAt, then name (the planner's
# own order for the queue).
_GROUPS = {
    Phase.RUNNING: 0,
    Phase.STARTING: 0,
    Phase.QUEUED: 1,
    Phase.UNSCHEDULABLE: 2,
    Phase.SUSPENDED: 2,
    Phase.INVALID: 3,
}
_GROUP_NOT_SEEN = 2
_GROUP_FINISHED = 4


# --- values ------------------------------------------------------------------------------------


def rfc3339(value: dt.datetime | float, timespec: str = "milliseconds") -> str:
    """RFC 3339 UTC with a Z, as the sidecars write it; `value` may be an epoch time."""
    if not isinstance(value, dt.datetime):
        value = dt.datetime.fromtimestamp(value, dt.UTC)
    return value.astimezone(dt.UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def human_age(seconds: float) -> str:
    """kubectl's style: 45s, 12m, 3h, 5d (the larger unit once it reads at least 2)."""
    seconds = max(seconds, 0.0)
    if seconds >= 2 * 86400:
        return f"{int(seconds // 86400)}d"
    if seconds >= 2 * 3600:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60:
        return f"{int(seconds // 60)}m"
    return f"{int(seconds)}s"


def resources(task: Task | None) -> dict[str, Any] | None:
    if task is None:
        return None
    r = task.spec.resources
    return {"cpu": r.cpu, "gpu": r.gpu, "memory": format_memory(r.memory)}


def jsonable(value: Any) -> Any:
    """YAML can hold dates, bytes and sets; JSON cannot. Anything odd is shown as a string."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value)


# --- one spec file, as read now ----------------------------------------------------------------


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
        # The same hash the store keeps as TaskInput.raw_hash: sha256 of the bytes on disk.
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


def status_body(status: TaskStatus | None, errors: list[SpecError] | None = None) -> dict[str, Any]:
    """The sidecar's status; for a task the loop has not seen yet, what we can tell now."""
    if status is not None:
        body: dict[str, Any] = status.to_document()["status"]
    elif errors:
        body = {
            "phase": Phase.INVALID.value,
            "reason": Reason.INVALID_SPEC.value,
            "message": str(errors[0]),
        }
    else:
        body = {
            "phase": None,
            "reason": Reason.NOT_YET_RECONCILED.value,
            "message": API_NOT_SEEN_MESSAGE,
        }
    if errors:
        body["specErrors"] = [str(e) for e in errors]
    return body


def task_object(spec: SpecFile, status: TaskStatus | None) -> dict[str, Any]:
    """Kubernetes style: the spec as written in the file, plus the status beside it.

    A GET result can be sent back with PUT: `status` is ignored there.
    """
    document = spec.document() if spec.task is not None else None
    if document is None:
        document = {"apiVersion": API_VERSION, "kind": "Task", "spec": None}
    out: dict[str, Any] = jsonable(document)
    found = out.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    # metadata.name is the file's stem (the folder is in the URL), so a PUT of this is valid.
    out["metadata"] = {"name": spec.name.rsplit("/", 1)[-1], **metadata}
    out["status"] = status_body(status, spec.errors)
    return out


# --- a task in a listing -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskView:
    """A task as a listing shows it: its spec file as read and its sidecar."""

    input: TaskInput
    status: TaskStatus | None

    @property
    def name(self) -> str:
        return self.input.name

    @property
    def path(self) -> Path | None:
        return self.input.path

    @property
    def task(self) -> Task | None:
        return self.input.task

    @property
    def error(self) -> SpecError | None:
        return self.input.error

    @property
    def last_valid(self) -> Task | None:
        """The last good parse, while the file is broken."""
        return self.input.last_valid

    @property
    def body(self) -> TaskStatusBody | None:
        return self.status.status if self.status is not None else None

    @property
    def known(self) -> Task | None:
        """The spec now, else the last good one (what the loop keeps running)."""
        return self.task or self.last_valid

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.task.metadata.labels) if self.task is not None else {}

    @property
    def phase(self) -> str:
        """The sidecar's phase; for a task without one, Invalid or "-" as we can tell now."""
        if self.body is not None:
            return self.body.phase.value
        return Phase.INVALID.value if self.task is None else NOT_SEEN

    @property
    def message(self) -> str:
        if self.body is not None:
            return self.body.message or ""
        return str(self.error) if self.error is not None else NOT_SEEN_MESSAGE

    @property
    def overusing(self) -> str | None:
        """The Overusing condition's message (its run holds more than it declares, or was
        stopped for it), or None when the status does not list it."""
        body = self.body
        if body is None or not body.conditions:
            return None
        for cond in body.conditions:
            if cond.type == ConditionType.OVERUSING:
                return cond.message
        return None

    @property
    def stale(self) -> bool:
        """The sidecar describes another version of the spec than the file now holds."""
        body, task = self.body, self.task
        return (
            body is not None
            and task is not None
            and body.spec_hash is not None
            and body.spec_hash != self.input.hash_of(task)
        )

    def sort_key(self) -> tuple[int, int, int, float, str]:
        body = self.body
        if body is None:
            group = _GROUP_NOT_SEEN if self.task is not None else _GROUPS[Phase.INVALID]
        else:
            group = _GROUPS.get(body.phase, _GROUP_FINISHED)
        priority = self.task.spec.priority if self.task is not None else -1
        queued = body.queued_at.timestamp() if body is not None and body.queued_at else None
        return (group, -priority, queued is None, queued or 0.0, order_key(self.name))

    def age_seconds(self, now: float) -> float | None:
        """Since this run was queued; for a task not seen yet, since its file was written."""
        body = self.body
        if body is not None and body.queued_at is not None:
            return now - body.queued_at.timestamp()
        if self.path is None:
            return None
        try:
            return now - os.stat(self.path).st_mtime
        except OSError:
            return None

    def to_object(self) -> dict[str, Any]:
        """Kubernetes style: apiVersion, kind, metadata, spec and status in one document."""
        if self.task is not None:
            document = self.task.to_document()
        else:
            document = {"apiVersion": API_VERSION, "kind": "Task", "spec": None}
        metadata = {"name": self.name, **document.get("metadata", {})}
        metadata["name"] = self.name  # the full name (team-a/train), which commands take
        if self.status is not None:
            status: dict[str, Any] = self.status.to_document().get("status", {})
        elif self.error is not None:
            status = {"phase": Phase.INVALID.value, "reason": Reason.INVALID_SPEC.value}
        else:
            status = {
                "phase": None,
                "reason": Reason.NOT_YET_RECONCILED.value,
                "message": NOT_SEEN_MESSAGE,
            }
        if self.error is not None:
            status["specError"] = str(self.error)
        return {
            "apiVersion": API_VERSION,
            "kind": "Task",
            "metadata": metadata,
            "spec": document.get("spec"),
            "status": status,
        }
