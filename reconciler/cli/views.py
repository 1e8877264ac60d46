"""A task as the CLI shows it: its spec file (parsed) and its sidecar, and the queue order."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.cli.common import CliError
from specs.models import API_VERSION, Phase, Task, TaskStatus, TaskStatusBody
from specs.parse import SpecError
from specs.store import FolderUnavailable, TaskStore

NOT_SEEN = "-"  # the phase column of a task the reconciler has not written a status for yet
NOT_SEEN_MESSAGE = "not yet seen by the reconciler (is `rayqueue serve` running?)"

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


@dataclass(frozen=True)
class TaskView:
    name: str
    path: Path
    task: Task | None
    error: SpecError | None
    status: TaskStatus | None

    @property
    def body(self) -> TaskStatusBody | None:
        return self.status.status if self.status is not None else None

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
    def stale(self) -> bool:
        """The sidecar describes another version of the spec than the file now holds."""
        body = self.body
        return (
            body is not None
            and self.task is not None
            and body.spec_hash is not None
            and body.spec_hash != self.task.spec_hash()
        )

    def sort_key(self) -> tuple[int, int, int, float, str]:
        body = self.body
        if body is None:
            group = _GROUP_NOT_SEEN if self.task is not None else _GROUPS[Phase.INVALID]
        else:
            group = _GROUPS.get(body.phase, _GROUP_FINISHED)
        priority = self.task.spec.priority if self.task is not None else -1
        queued = body.queued_at.timestamp() if body is not None and body.queued_at else None
        return (group, -priority, queued is None, queued or 0.0, self.name)

    def age_seconds(self, now: float) -> float | None:
        """Since this run was queued; for a task not seen yet, since its file was written."""
        body = self.body
        if body is not None and body.queued_at is not None:
            return now - body.queued_at.timestamp()
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
            status = {"phase": Phase.INVALID.value, "reason": "InvalidSpec"}
        else:
            status = {"phase": None, "reason": "NotYetReconciled", "message": NOT_SEEN_MESSAGE}
        if self.error is not None:
            status["specError"] = str(self.error)
        return {
            "apiVersion": API_VERSION,
            "kind": "Task",
            "metadata": metadata,
            "spec": document.get("spec"),
            "status": status,
        }


def load_views(store: TaskStore) -> list[TaskView]:
    """Every task in the folder with its sidecar, in queue order."""
    try:
        entries = store.scan()
        statuses = store.read_statuses()
    except FolderUnavailable as exc:
        raise CliError(f"{exc} (pass --dir, or set RAYQUEUE_DIR)") from None
    views = [
        TaskView(name, entry.path, entry.task, entry.error, statuses.get(name))
        for name, entry in entries.items()
    ]
    return sorted(views, key=TaskView.sort_key)


def find(views: Iterable[TaskView], name: str) -> TaskView:
    for view in views:
        if view.name == name:
            return view
    raise CliError(f'task "{name}" not found')
