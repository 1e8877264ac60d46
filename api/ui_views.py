"""The web view's JSON: one row per task, the header's counts. Pure: views in, JSON out.

The order of the rows is the task service's queue order (specs/service/views.py), the one `rayqueue
get` prints: what runs now, the waiting tasks in the order they will be admitted, what is held
back, what is broken, then finished tasks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from specs.service.arrayviews import ArrayView, group
from specs.service.views import NOT_SEEN, TaskView
from specs.task.quantity import readable_resources


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def job_url(dashboard: str | None, submission_id: str | None) -> str | None:
    """The Ray dashboard's page of a job (its single-page app routes on the fragment)."""
    if not dashboard or not submission_id:
        return None
    base = dashboard if "://" in dashboard else f"http://{dashboard}"
    return f"{base.rstrip('/')}/#/jobs/{submission_id}"


def task_row(view: TaskView, *, dashboard: str | None) -> dict[str, Any]:
    body = view.body
    task = view.known
    resources = resources_text = None
    if task is not None:
        r = task.spec.resources
        resources = {"cpu": r.cpu, "gpu": r.gpu, "memory": r.memory}
        resources_text = readable_resources(r.cpu, r.gpu, r.memory)
    source = body.source if body is not None else None
    return {
        "name": view.name,
        # The team queue the loop put the task in (None until a pass saw it, or without queues).
        "queue": body.queue if body is not None else None,
        "labels": view.labels,
        "priority": task.spec.priority if task is not None else None,
        "phase": None if view.phase == NOT_SEEN else view.phase,
        "position": body.queue_position if body is not None else None,
        "resources": resources,
        # The same, as a person reads it (`0.5 CPU, 15Gi`): the page shows this one.
        "resourcesText": resources_text,
        "reason": body.reason if body is not None else None,
        "message": view.message,
        "run": body.run if body is not None else None,
        "submissionId": body.submission_id if body is not None else None,
        "jobUrl": job_url(dashboard, body.submission_id if body is not None else None),
        "queuedAt": _iso(body.queued_at) if body is not None else None,
        "submittedAt": _iso(body.submitted_at) if body is not None else None,
        "startedAt": _iso(body.started_at) if body is not None else None,
        "finishedAt": _iso(body.finished_at) if body is not None else None,
        "revision": source.revision if source is not None else None,
        "dirty": source.dirty if source is not None else None,
    }


def array_row(array: ArrayView, *, dashboard: str | None) -> dict[str, Any]:
    """A task array as one row: its first element's fields, the array's name and phase, its
    progress as the message, and the counts the page draws as a progress bar."""
    row = task_row(array.first, dashboard=dashboard)
    counts = array.counts
    positions = [e.body.queue_position for e in array.elements if e.body is not None]
    known = [p for p in positions if p is not None]
    row.update(
        name=array.name,
        phase=array.phase,
        position=min(known) if known else None,
        reason=None,
        message=array.progress,
        run=None,
        submissionId=None,
        jobUrl=None,
        array={
            "size": len(array.elements),
            "succeeded": counts["Succeeded"],
            "running": counts["Running"] + counts["Starting"],
            "failed": counts["Failed"] + counts["TimedOut"] + counts["Lost"],
        },
    )
    return row


@dataclass(frozen=True)
class RowsPage:
    """Some of the table's rows, from `start`, and how many rows the whole table has."""

    rows: list[dict[str, Any]]
    start: int
    total: int

    @property
    def next_start(self) -> int | None:
        """Where the next page starts; None after the last."""
        end = self.start + len(self.rows)
        return end if end < self.total else None


def rows_page(
    views: Iterable[TaskView], *, dashboard: str | None, start: int, limit: int | None
) -> RowsPage:
    """The table's rows (a task each, a task array as one) from `start`, at most `limit` of
    them (None: all): only those are built."""
    grouped = group(views)
    chosen = grouped[start:] if limit is None else grouped[start : start + limit]
    built = [
        task_row(v, dashboard=dashboard)
        if isinstance(v, TaskView)
        else array_row(v, dashboard=dashboard)
        for v in chosen
    ]
    return RowsPage(built, start, len(grouped))


def finished_since(views: Iterable[TaskView], since: datetime) -> int:
    """Tasks whose last run ended at or after `since`."""
    return sum(
        1
        for v in views
        if v.body is not None
        and v.body.phase.finished
        and v.body.finished_at is not None
        and v.body.finished_at >= since
    )
