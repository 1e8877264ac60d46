"""The legacy endpoints' answer for a task. Everything else a view shows is in
specs.service.views."""

from __future__ import annotations

from typing import Any

from specs.service.views import SpecFile, status_body
from specs.task.status import TaskStatus


def legacy_state(
    task_id: str, name: str, spec: SpecFile, status: TaskStatus | None
) -> dict[str, Any]:
    """The answer of the legacy endpoints: the task's id, its spec's knobs and its phase."""
    task = spec.task
    body = status_body(status, spec.errors)
    return {
        "task_id": task_id,
        "task": name,
        "priority": task.spec.priority if task else None,
        "suspend": task.spec.suspend if task else None,
        "phase": body.get("phase"),
        "reason": body.get("reason"),
        "message": body.get("message"),
        "queue_position": body.get("queuePosition"),
        "submission_id": body.get("submissionId"),
    }
