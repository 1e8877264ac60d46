"""The web view's rows: fields from spec and sidecar, queue order, dashboard links."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api.ui_views import finished_since, job_url, queue_order, task_row
from specs.models import Metadata, Phase, Task, TaskStatus, TaskStatusBody

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def task(priority: int = 0, **labels: str) -> Task:
    return Task.model_validate(
        {
            "apiVersion": "rayqueue/v1",
            "kind": "Task",
            "metadata": {"labels": labels},
            "spec": {"entrypoint": "x", "priority": priority, "resources": {"cpu": 1}},
        }
    )


def status(phase: Phase, **body: object) -> TaskStatus:
    return TaskStatus(metadata=Metadata(), status=TaskStatusBody(phase=phase, **body))


def test_row_has_every_column() -> None:
    row = task_row(
        "team/a",
        task(7, team="a"),
        status(
            Phase.QUEUED,
            reason="WaitingForResources",
            message="needs 1 CPU; 0 free",
            queue_position=2,
            run=1,
            submission_id="rq-a-1",
            queued_at=T0,
        ),
        dashboard="127.0.0.1:8265",
        queue="research",
    )
    assert row["name"] == "team/a" and row["queue"] == "research" and row["priority"] == 7
    assert row["phase"] == "Queued" and row["position"] == 2
    assert row["reason"] == "WaitingForResources" and row["message"] == "needs 1 CPU; 0 free"
    assert row["labels"] == {"team": "a"} and row["resources"]["cpu"] == 1
    assert row["jobUrl"] == "http://127.0.0.1:8265/#/jobs/rq-a-1"
    assert row["queuedAt"] == T0.isoformat()


def test_unseen_task_has_no_phase() -> None:
    row = task_row("new", task(), None, dashboard=None)
    assert row["phase"] is None and row["jobUrl"] is None


def test_queue_order() -> None:
    rows = [
        task_row("done-old", task(), status(Phase.SUCCEEDED, finished_at=T0), dashboard=None),
        task_row("q2", task(), status(Phase.QUEUED, queue_position=2), dashboard=None),
        task_row("new", task(), None, dashboard=None),
        task_row(
            "done-new",
            task(),
            status(Phase.FAILED, finished_at=T0 + timedelta(hours=1)),
            dashboard=None,
        ),
        task_row("bad", task(), status(Phase.INVALID), dashboard=None),
        task_row("run", task(), status(Phase.RUNNING, started_at=T0), dashboard=None),
        task_row("q1", task(), status(Phase.QUEUED, queue_position=1), dashboard=None),
    ]
    assert [r["name"] for r in queue_order(rows)] == [
        "run",
        "q1",
        "q2",
        "bad",
        "done-new",
        "done-old",
        "new",
    ]


def test_job_url_and_finished_since() -> None:
    assert job_url("http://h:8265/", "x") == "http://h:8265/#/jobs/x"
    assert job_url(None, "x") is None
    statuses = [
        status(Phase.SUCCEEDED, finished_at=T0),
        status(Phase.FAILED, finished_at=T0 - timedelta(days=2)),
        status(Phase.RUNNING),
    ]
    assert finished_since(statuses, T0 - timedelta(days=1)) == 1
