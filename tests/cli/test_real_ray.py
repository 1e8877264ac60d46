"""`logs` and `plan` against the session's real local Ray head."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_QUEUE, SubmitRequest
from specs.folder.store import TaskStore
from specs.task.models import Metadata, Phase
from specs.task.status import TaskStatus, TaskStatusBody
from tests.cli.conftest import snapshot, spec_text, write

pytestmark = pytest.mark.ray


def test_logs_and_follow(rq, tasks: Path, ray_adapter: RayJobsAdapter, ray_head: str) -> None:
    sid = f"cli-logs-{uuid.uuid4().hex[:8]}"
    entrypoint = (
        "python -c \"import time; print('first', flush=True); time.sleep(2); print('last')\""
    )
    ray_adapter.submit(SubmitRequest(sid, entrypoint, None, {}))
    write(tasks, "job", spec_text())
    status = TaskStatus(
        metadata=Metadata(name="job"),
        status=TaskStatusBody(phase=Phase.STARTING, submission_id=sid),
    )
    TaskStore(tasks).write_status("job", status)

    # -f follows until the job ends, so it sees the line printed two seconds in.
    result = rq("logs", "job", "-f", "--address", ray_head)
    assert result.code == 0, result.err
    assert "first" in result.out and "last" in result.out

    result = rq("logs", "job", "--address", ray_head)
    assert result.code == 0
    assert result.out.rstrip().endswith("last")


def test_plan_reads_ray_but_changes_nothing(rq, tasks: Path, ray_adapter, ray_head: str) -> None:
    queue_id = f"cli-plan-{uuid.uuid4().hex[:8]}"
    write(tasks, "fits", spec_text(cpu=1, priority=5))
    write(tasks, "too-big", spec_text(cpu=1000))
    before = snapshot(tasks)
    result = rq("plan", "--address", ray_head, "--queue-id", queue_id)
    assert result.code == 0, result.err
    assert "Would submit (1):" in result.out and "fits" in result.out
    assert "Unschedulable (1):" in result.out and "asks for 1000 CPU" in result.out
    assert "Cluster: 4 CPU" in result.out
    time.sleep(0.5)
    assert not [j for j in ray_adapter.list_jobs() if j.metadata.get(META_QUEUE) == queue_id]
    assert snapshot(tasks) == before
