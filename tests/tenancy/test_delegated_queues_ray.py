"""A delegated queue file against a real Ray head: team-a's admin token writes
`team-a/_queues.yaml` with a sub-queue that asks `reclaimWithinCohort: Any`, which the top file
never gave team-a; team-b's real running jobs, borrowing team-a's idle quota, must go on
running. The same attack as test_delegated_queues.py, with Ray's own record of the jobs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from api.app import create_app
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_QUEUE, META_TASK, RayJob
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.api.conftest import BASE_URL, task_json
from tests.tenancy.conftest import auth

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


class Loop:
    def __init__(self, reconciler: Reconciler, ray: RayJobsAdapter) -> None:
        self.reconciler = reconciler
        self.ray = ray

    def until(self, done: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.reconciler.run_pass()
            if done():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    def status(self, name: str) -> dict[str, Any]:
        path = self.reconciler.store.status_path(name)
        try:
            document = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            return {}
        return dict(document.get("status", {}))

    def ours(self) -> list[RayJob]:
        queue = self.reconciler.options.queue_id
        return [j for j in self.ray.list_jobs() if j.metadata.get(META_QUEUE) == queue]


@pytest.fixture
def loop_and_api(
    ray_head: str, tasks_dir: Path, tokens_file: Path
) -> Iterator[tuple[Loop, TestClient]]:
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
    (tasks_dir / "_queues.yaml").write_text(TOP)
    settings = Settings(
        tasks_dir=tasks_dir,
        address=ray_head,
        queue_id=f"delegated-{uuid.uuid4().hex[:8]}",
        team_tokens=tokens_file,
        api=True,
    )
    ray = RayJobsAdapter(ray_head, timeout_seconds=10)
    reconciler = Reconciler(settings, TaskStore(tasks_dir), ray)
    loop = Loop(reconciler, ray)
    with TestClient(create_app(settings, reconciler=reconciler, ray=ray), base_url=BASE_URL) as api:
        try:
            yield loop, api
        finally:  # the head is the session's: leave no job of ours holding its CPUs
            for job in loop.ours():
                if not job.terminal:
                    ray.stop(job.submission_id)


def test_a_delegated_sub_queue_does_not_preempt_another_teams_real_job(
    loop_and_api: tuple[Loop, TestClient],
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
