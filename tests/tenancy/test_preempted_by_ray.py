"""A preemption across folders on a real Ray head: team-b's urgent task stops team-a's real
job and runs; team-a's job runs again after it. What team-a reads of its task (its sidecar and
the API's task view) never names team-b's task. The same as test_preempted_by.py, with Ray's
own record of the jobs."""

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
from specs.cluster import META_QUEUE, META_TASK, STOPPED, RayJob
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from specs.task.visibility import ANOTHER_FOLDER
from tests.api.conftest import BASE_URL, task_json
from tests.tenancy.conftest import auth

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]


class Loop:
    def __init__(self, reconciler: Reconciler, ray: RayJobsAdapter, api: TestClient) -> None:
        self.reconciler = reconciler
        self.ray = ray
        self.api = api
        self.seen_by_team_a: list[str] = []

    def until(self, done: Callable[[], bool], what: str, timeout: float = 90) -> None:
        """Passes until `done`; after each, what team-a reads of team-a/low is kept."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.reconciler.run_pass()
            path = self.reconciler.store.status_path("team-a/low")
            if path.exists():
                view = self.api.get("/tasks/team-a/low", headers=auth("team-a"))
                self.seen_by_team_a.append(path.read_text() + view.text)
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
def loop(ray_head: str, tasks_dir: Path, tokens_file: Path) -> Iterator[Loop]:
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
    settings = Settings(
        tasks_dir=tasks_dir,
        address=ray_head,
        queue_id=f"preempted-by-{uuid.uuid4().hex[:8]}",
        team_tokens=tokens_file,
        api=True,
        preemption="LowerPriority",
        preemption_grace_seconds=1,
    )
    ray = RayJobsAdapter(ray_head, timeout_seconds=10)
    reconciler = Reconciler(settings, TaskStore(tasks_dir), ray)
    with TestClient(create_app(settings, reconciler=reconciler, ray=ray), base_url=BASE_URL) as api:
        running = Loop(reconciler, ray, api)
        try:
            yield running
        finally:  # the head is the session's: leave no job of ours holding its CPUs
            for job in running.ours():
                if not job.terminal:
                    ray.stop(job.submission_id)


def test_a_real_preemption_across_folders_names_no_preemptor_to_the_victim(loop: Loop) -> None:
    api = loop.api
    low = task_json("sleep 120", cpu=4)
    assert api.put("/tasks/team-a/low", json=low, headers=auth("team-a")).status_code == 201
    loop.until(lambda: loop.status("team-a/low").get("phase") == "Running", "team-a's job")
    urgent = task_json("sleep 1", cpu=4, priority=9)
    assert api.put("/tasks/team-b/urgent", json=urgent, headers=auth("team-b")).status_code == 201
    loop.until(lambda: bool(loop.status("team-a/low").get("preemptions")), "the preemption")
    assert str(loop.status("team-a/low").get("preemptedBy")).startswith(ANOTHER_FOLDER)
    loop.until(
        lambda: loop.status("team-b/urgent").get("phase") == "Succeeded", "the preemptor's run"
    )
    loop.until(lambda: loop.status("team-a/low").get("phase") == "Running", "the victim's next run")
    again = loop.status("team-a/low")
    assert again["run"] == 2 and again["preemptions"] == 1 and "preemptedBy" not in again
    # Ray's own record: team-a's first run was stopped.
    first = [
        j
        for j in loop.ours()
        if j.metadata.get(META_TASK) == "team-a/low" and j.metadata.get("rayqueue.run") == "1"
    ]
    assert [j.status for j in first] == [STOPPED]
    leaks = [text for text in loop.seen_by_team_a if "team-b" in text or "urgent" in text]
    assert not leaks, leaks[0]
