"""A forged status sidecar against a real Ray head: team-a's own task's sidecar, edited to name
a run of team-b, must not make the API serve team-b's real job log to team-a. The same attack
as test_forged_sidecars.py, with the log Ray itself keeps for the job."""

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
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.api.conftest import BASE_URL, task_json
from tests.tenancy.conftest import auth

pytestmark = pytest.mark.ray


class Loop:
    """The real loop and store over the session's Ray head, driven pass by pass."""

    def __init__(self, reconciler: Reconciler) -> None:
        self.reconciler = reconciler

    def until(self, done: Callable[[], Any], what: str, timeout: float = 60) -> None:
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


@pytest.fixture
def loop_and_api(
    ray_head: str, tasks_dir: Path, tokens_file: Path
) -> Iterator[tuple[Loop, TestClient]]:
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
    settings = Settings(
        tasks_dir=tasks_dir,
        address=ray_head,
        queue_id=f"tenancy-{uuid.uuid4().hex[:8]}",
        team_tokens=tokens_file,
        rescan_seconds=0,  # every pass reads every file: a forged one is seen at once
        rescan_cpu_share=0,
        api=True,
    )
    ray = RayJobsAdapter(ray_head, timeout_seconds=10)
    reconciler = Reconciler(settings, TaskStore(tasks_dir), ray)
    with TestClient(create_app(settings, reconciler=reconciler, ray=ray), base_url=BASE_URL) as api:
        yield Loop(reconciler), api


def test_a_forged_sidecar_does_not_serve_another_teams_real_log(
    loop_and_api: tuple[Loop, TestClient], tasks_dir: Path
) -> None:
    loop, api = loop_and_api
    secret = f"team-b-secret-{uuid.uuid4().hex}"
    b = auth("team-b")
    assert api.put(
        "/tasks/team-b/secretjob", json=task_json(f"echo {secret}"), headers=b
    ).is_success
    assert api.put(
        "/tasks/team-a/peek", json=task_json("echo hi"), headers=auth("team-a")
    ).is_success
    done = ("Succeeded", "Failed")
    loop.until(
        lambda: (
            loop.status("team-b/secretjob").get("phase") in done
            and loop.status("team-a/peek").get("phase") in done
        ),
        "both jobs to end",
    )
    assert loop.status("team-b/secretjob")["phase"] == "Succeeded"
    assert secret in api.get("/tasks/team-b/secretjob/logs", headers=b).text  # team-b's own
    theirs = loop.status("team-b/secretjob")["submissionId"]
    mine = loop.status("team-a/peek")
    forged = {
        "apiVersion": "rayqueue/v1",
        "kind": "TaskStatus",
        "metadata": {"name": "team-a/peek"},
        "status": mine | {"submissionId": theirs},
    }
    (tasks_dir / "team-a" / "peek.status.yaml").write_text(yaml.safe_dump(forged))
    for _ in range(3):
        loop.reconciler.run_pass()
    logs = api.get("/tasks/team-a/peek/logs", headers=auth("team-a"))
    assert secret not in logs.text, "team-b's log served to team-a"
