"""Tampering made visible, against a real Ray head: another Ray client (any job can reach the
dashboard) stops a run of ours through Ray's own Job API. rayqueue cannot prevent it on a
shared cluster; it must record it: the status (StoppedInRay), one audit line, the metric."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.ops.metrics import QueueMetrics
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import STOPPED
from specs.folder.store import TaskStore
from specs.queues.config import DEFAULT_QUEUE
from specs.settings.process import Settings
from tests.support.specs import write_task
from tests.unit.shell.ops.test_metrics import value

pytestmark = pytest.mark.ray


def _until(
    reconciler: Reconciler, done: Callable[[], bool], what: str, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reconciler.run_pass()
        if done():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _status(reconciler: Reconciler, name: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(reconciler.store.status_path(name).read_text())
    except FileNotFoundError:
        return {}
    return dict(document.get("status", {}))


def test_a_stop_by_another_ray_client_is_recorded(
    ray_head: str, tasks_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ray.job_submission import JobSubmissionClient  # only here: the suite runs without Ray

    (tasks_dir / "team-b").mkdir()
    settings = Settings(
        tasks_dir=tasks_dir,
        address=ray_head,
        queue_id=f"tenancy-{uuid.uuid4().hex[:8]}",
        rescan_seconds=0,
        rescan_cpu_share=0,
    )
    metrics = QueueMetrics("0")
    ray = RayJobsAdapter(ray_head, timeout_seconds=10)
    reconciler = Reconciler(settings, TaskStore(tasks_dir), ray, metrics=metrics)
    write_task(tasks_dir / "team-b", "train", "python -c 'import time; time.sleep(600)'")
    _until(reconciler, lambda: _status(reconciler, "team-b/train").get("phase") == "Running",
           "team-b/train to run")  # fmt: skip
    sid = str(_status(reconciler, "team-b/train")["submissionId"])

    # Another client of the same Ray cluster (a job of another team, say) stops it.
    JobSubmissionClient(ray_head).stop_job(sid)
    with caplog.at_level(logging.INFO):
        _until(reconciler, lambda: _status(reconciler, "team-b/train").get("rayStatus") == STOPPED,
               "the stop to be seen")  # fmt: skip
        for _ in range(3):
            reconciler.run_pass()

    status = _status(reconciler, "team-b/train")
    assert status["reason"] == "StoppedInRay", status
    assert "outside rayqueue" in status["message"]
    audit = [r.getMessage() for r in caplog.records if r.name == "rayqueue.audit"]
    assert len(audit) == 1 and "team-b/train" in audit[0] and sid in audit[0], audit
    assert value(metrics, "rayqueue_stopped_in_ray_tasks_total", queue=DEFAULT_QUEUE) == 1
