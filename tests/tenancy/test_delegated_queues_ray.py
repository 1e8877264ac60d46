"""A delegated queue file against a real Ray head: team-a's admin token writes
`team-a/_queues.yaml` with a sub-queue that asks `reclaimWithinCohort: Any`, which the top file
never gave team-a; team-b's real running jobs, borrowing team-a's idle quota, must go on
running. The same attack as test_delegated_queues.py, with Ray's own record of the jobs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from specs.cluster import META_TASK
from tests.api.conftest import task_json
from tests.tenancy.conftest import auth
from tests.tenancy.realloop import RealLoop, real_loop

pytestmark = pytest.mark.ray

# The head has 4 CPUs: two for each team, and no preemption for either.
TOP = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 2}
    - name: team-b
      nominalQuota: {cpu: 2}
"""
TEAM_A_OWN = b"""\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a/x
      nominalQuota: {cpu: 2}
      preemption: {reclaimWithinCohort: Any, withinQueue: LowerPriority}
"""


@pytest.fixture
def loop_and_api(
    ray_head: str, tasks_dir: Path, tokens_file: Path
) -> Iterator[tuple[RealLoop, TestClient]]:
    (tasks_dir / "_queues.yaml").write_text(TOP)
    with real_loop(ray_head, tasks_dir, tokens_file) as loop:
        yield loop, loop.api


def test_a_delegated_sub_queue_does_not_preempt_another_teams_real_job(
    loop_and_api: tuple[RealLoop, TestClient],
) -> None:
    loop, api = loop_and_api
    b = [f"team-b/b{i}" for i in range(4)]
    for name in b:  # team-b fills the head, borrowing team-a's idle 2 CPUs
        put = api.put(f"/tasks/{name}", json=task_json("sleep 120"), headers=auth("team-b"))
        assert put.status_code == 201, put.text
    loop.until(
        lambda: all(loop.status(name).get("phase") == "Running" for name in b),
        "team-b's four jobs to run",
    )
    put = api.put("/config/team-a/_queues.yaml", content=TEAM_A_OWN, headers=auth("team-a-admin"))
    assert put.status_code == 201, put.text
    job = task_json("sleep 1", cpu=2, priority=5)
    assert api.put("/tasks/team-a/x/job", json=job, headers=auth("team-a")).status_code == 201
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:  # a preemption would be decided on the first passes
        loop.reconciler.run_pass()
        time.sleep(0.3)
    assert [loop.status(name).get("phase") for name in b] == ["Running"] * 4
    assert all("preemptedBy" not in loop.status(name) for name in b)
    live = [j for j in loop.ours() if j.metadata.get(META_TASK, "").startswith("team-b/")]
    assert sorted(j.status for j in live) == ["RUNNING"] * 4  # Ray's own record
    assert loop.status("team-a/x/job").get("phase") == "Queued"
