"""The web view's task rows and their order. Pure: specs and sidecars in, JSON out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from specs.models import Phase, Task, TaskStatus

# The table reads top to bottom as the cluster sees the queue: what holds resources now, then
# the waiting tasks in the order they will be admitted, then what cannot run, then history.
_GROUP = {
    Phase.RUNNING: 0,
    Phase.STARTING: 0,
    Phase.QUEUED: 1,
    Phase.UNSCHEDULABLE: 2,
    Phase.SUSPENDED: 2,
    Phase.INVALID: 2,
}
_HISTORY = 3
_UNSEEN = 4


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def job_url(dashboard: str | None, submission_id: str | None) -> str | None:
    """The Ray dashboard's page of a job (its single-page app routes on the fragment)."""
    if not dashboard or not submission_id:
        return None
    base = dashboard if "://" in dashboard else f"http://{dashboard}"
    return f"{base.rstrip('/')}/#/jobs/{submission_id}"


def task_row(
    name: str,
    task: Task | None,
    status: TaskStatus | None,
    *,
    dashboard: str | None,
    queue: str | None = None,
) -> dict[str, Any]:
    body = status.status if status is not None else None
    labels = dict(task.metadata.labels) if task is not None else {}
    resources = None
    if task is not None:
        r = task.spec.resources
        resources = {"cpu": r.cpu, "gpu": r.gpu, "memory": r.memory}
    return {
        "name": name,
        "queue": queue,
        "labels": labels,
        "priority": task.spec.priority if task is not None else None,
        "phase": body.phase.value if body is not None else None,
        "position": body.queue_position if body is not None else None,
        "resources": resources,
        "reason": body.reason if body is not None else None,
        "message": body.message if body is not None else None,
        "run": body.run if body is not None else None,
        "submissionId": body.submission_id if body is not None else None,
        "jobUrl": job_url(dashboard, body.submission_id if body is not None else None),
        "queuedAt": _iso(body.queued_at) if body is not None else None,
        "submittedAt": _iso(body.submitted_at) if body is not None else None,
        "startedAt": _iso(body.started_at) if body is not None else None,
        "finishedAt": _iso(body.finished_at) if body is not None else None,
        "revision": None,
    }


def _order_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    phase = row["phase"]
    group = _UNSEEN if phase is None else _GROUP.get(Phase(phase), _HISTORY)
    if group == 0:
        return (group, row["startedAt"] or row["submittedAt"] or "", row["name"])
    if group == 1:
        position = row["position"] if row["position"] is not None else 10**9
        return (group, position, row["name"])
    if group == _HISTORY:
        # Newest first: ISO strings of one zone sort as times; invert by sorting on negation.
        return (group, _neg(row["finishedAt"]), row["name"])
    return (group, -(row["priority"] or 0), row["name"])


def _neg(text: str | None) -> tuple[int, ...]:
    return tuple(-ord(c) for c in (text or ""))


def queue_order(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=_order_key)


def finished_since(statuses: Iterable[TaskStatus], since: datetime) -> int:
    """Tasks whose last run ended at or after `since`."""
    return sum(
        1
        for s in statuses
        if s.status.phase.finished
        and s.status.finished_at is not None
        and s.status.finished_at >= since
    )
