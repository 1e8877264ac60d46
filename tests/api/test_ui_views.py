"""The web view's rows: fields from spec and sidecar, dashboard links, the 24 h count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from api.ui_views import finished_since, job_url, task_row
from specs.service.views import TaskView
from specs.task.inputs import TaskInput
from specs.task.models import Metadata, Phase, SourceRef
from specs.task.records import Task
from specs.task.status import TaskStatus, TaskStatusBody

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


def view(name: str, t: Task | None, s: TaskStatus | None) -> TaskView:
    return TaskView(TaskInput(name, t, base=Path(f"/x/{name}.yaml")), s)


def test_row_has_every_column() -> None:
    row = task_row(
        view(
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
                queue="research",
                source=SourceRef(revision="main@sha1:" + "a" * 40, dirty=True),
            ),
        ),
        dashboard="127.0.0.1:8265",
    )
    assert row["name"] == "team/a" and row["queue"] == "research" and row["priority"] == 7
    assert row["phase"] == "Queued" and row["position"] == 2
    assert row["reason"] == "WaitingForResources" and row["message"] == "needs 1 CPU; 0 free"
    assert row["labels"] == {"team": "a"} and row["resources"]["cpu"] == 1
    assert row["resourcesText"] == "1 CPU"
    assert row["jobUrl"] == "http://127.0.0.1:8265/#/jobs/rq-a-1"
    assert row["queuedAt"] == T0.isoformat()
    assert row["revision"].startswith("main@sha1:") and row["dirty"] is True


def test_unseen_task_has_no_phase() -> None:
    row = task_row(view("new", task(), None), dashboard=None)
    assert row["phase"] is None and row["jobUrl"] is None and row["revision"] is None


def test_job_url_and_finished_since() -> None:
    assert job_url("http://h:8265/", "x") == "http://h:8265/#/jobs/x"
    assert job_url(None, "x") is None
    views = [
        view("a", task(), status(Phase.SUCCEEDED, finished_at=T0)),
        view("b", task(), status(Phase.FAILED, finished_at=T0 - timedelta(days=2))),
        view("c", task(), status(Phase.RUNNING)),
        view("d", task(), None),
    ]
    assert finished_since(views, T0 - timedelta(days=1)) == 1


def test_row_shows_resources_in_readable_units() -> None:
    t = Task.model_validate(
        {
            "apiVersion": "rayqueue/v1",
            "kind": "Task",
            "metadata": {},
            "spec": {"entrypoint": "x", "resources": {"cpu": 0.5, "memory": "16145911399B"}},
        }
    )
    row = task_row(view("big", t, None), dashboard=None)
    assert row["resourcesText"] == "0.5 CPU, 15Gi" and row["resources"]["memory"] == 16145911399
