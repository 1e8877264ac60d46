"""A forged status sidecar against a real Ray head: team-a's own task's sidecar, edited to name
a run of team-b, must not make the API serve team-b's real job log to team-a. The same attack
as test_forged_sidecars.py, with the log Ray itself keeps for the job."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from tests.api.conftest import task_json
from tests.tenancy.conftest import auth
from tests.tenancy.realloop import RealLoop, real_loop

pytestmark = pytest.mark.ray


@pytest.fixture
def loop_and_api(
    ray_head: str, tasks_dir: Path, tokens_file: Path
) -> Iterator[tuple[RealLoop, TestClient]]:
    # Every pass reads every file: a forged one is seen at once.
    with real_loop(ray_head, tasks_dir, tokens_file, rescan_seconds=0, rescan_cpu_share=0) as loop:
        yield loop, loop.api


def test_a_forged_sidecar_does_not_serve_another_teams_real_log(
    loop_and_api: tuple[RealLoop, TestClient], tasks_dir: Path
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
