"""Status sidecars are files a team can write: a team that forges its own task's sidecar to
name another team's submission id must not get that run's log, nor see that job's state.
A run is ours only if the scheduler's own record says so, whatever the sidecar claims."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from specs.cluster import META_TASK, RUNNING, SUCCEEDED
from specs.task.models import format_timestamp
from specs.yamlio.parse import parse_task
from tests.api.conftest import task_json
from tests.support.specs import write_task
from tests.support.world import World
from tests.tenancy.conftest import auth

SECRET_LOG = "team-b's secret log line\n"


def _run_team_b(world: World, api: TestClient) -> str:
    """team-b's job, running, with a log; its submission id."""
    assert api.put("/tasks/team-b/secretjob", json=task_json(), headers=auth("team-b")).is_success
    world.step(2)
    submission_id = str(world.status("team-b/secretjob")["submissionId"])
    world.ray.set_status(submission_id, RUNNING)
    world.ray.set_logs(submission_id, SECRET_LOG)
    # team-b itself reads its log: the leak below is of a real, readable log.
    own = api.get("/tasks/team-b/secretjob/logs", headers=auth("team-b"))
    assert own.status_code == 200 and own.text == SECRET_LOG
    return submission_id


def _finished_team_a_task(world: World, api: TestClient) -> dict[str, Any]:
    """team-a's own task, run to success; its genuine status (uid, specHash, run)."""
    assert api.put("/tasks/team-a/peek", json=task_json(), headers=auth("team-a")).is_success
    world.step(2)
    world.ray.set_status(str(world.status("team-a/peek")["submissionId"]), SUCCEEDED)
    world.step()
    status = world.status("team-a/peek")
    assert status["phase"] == "Succeeded"
    return status


def _forge(path: Path, status: dict[str, Any]) -> None:
    document = {
        "apiVersion": "rayqueue/v1",
        "kind": "TaskStatus",
        "metadata": {"name": "team-a/peek"},
        "status": status,
    }
    path.write_text(yaml.safe_dump(document))


@pytest.mark.parametrize("phase", ["Succeeded", "Running"])
def test_a_forged_sidecar_does_not_serve_another_teams_log(
    teams: tuple[World, TestClient], tasks_dir: Path, phase: str
) -> None:
    world, api = teams
    theirs = _run_team_b(world, api)
    mine = _finished_team_a_task(world, api)
    # team-a commits a sidecar of its own task that keeps every genuine field but the id.
    _forge(
        tasks_dir / "team-a" / "peek.status.yaml", mine | {"phase": phase, "submissionId": theirs}
    )
    world.step(2, seconds=100)  # the next rescan reads the forged file
    logs = api.get("/tasks/team-a/peek/logs", headers=auth("team-a"))
    assert SECRET_LOG not in logs.text, "team-b's log served to team-a"


def test_a_forged_sidecar_is_ignored_and_rewritten(
    teams: tuple[World, TestClient], tasks_dir: Path
) -> None:
    world, api = teams
    theirs = _run_team_b(world, api)
    mine = _finished_team_a_task(world, api)
    _forge(
        tasks_dir / "team-a" / "peek.status.yaml",
        mine | {"phase": "Running", "submissionId": theirs},
    )
    world.step(2, seconds=100)
    status = world.status("team-a/peek")
    assert status.get("submissionId") != theirs, status
    shown = api.get("/tasks/team-a/peek", headers=auth("team-a")).json()
    assert theirs not in str(shown), shown
    # Nor is team-b's job stopped or otherwise touched because of team-a's file.
    assert world.ray.jobs[theirs].status == RUNNING


def test_an_edited_array_sidecar_does_not_serve_another_teams_log(
    teams: tuple[World, TestClient], tasks_dir: Path
) -> None:
    world, api = teams
    theirs = _run_team_b(world, api)
    write_task(tasks_dir / "team-a", "arr", array={"count": 2})
    world.step(2)
    jobs = {j.metadata[META_TASK]: j.submission_id for j in world.our_jobs()}
    mine = jobs["team-a/arr[0]"]
    world.ray.set_status(mine, SUCCEEDED)
    world.step()
    # team-a edits one element of its array's sidecar: the element now names team-b's run.
    sidecar = tasks_dir / "team-a" / "arr.array.status.yaml"
    text = sidecar.read_text()
    assert mine in text
    sidecar.write_text(text.replace(mine, theirs))
    world.step(2, seconds=100)
    logs = api.get("/tasks/team-a/arr[0]/logs", headers=auth("team-a"))
    assert SECRET_LOG not in logs.text, "team-b's log served to team-a"


def test_a_forged_pending_sidecar_is_not_adopted_stopped_or_shown(
    make_world: Callable[..., tuple[World, TestClient]],
    tasks_dir: Path,
    tokens_file: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """team-a writes a new task and, beside it, a sidecar saying its run is team-b's running
    job, pending, with that job's uid (read off its id): were it believed, the loop would
    follow team-b's job as team-a's run, show its state, and stop it when a higher-priority
    task of team-a preempts that run."""
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
    world, api = make_world(team_tokens=tokens_file, preemption="LowerPriority")
    theirs = _run_team_b(world, api)
    their_uid = theirs.split("-")[-2]  # rq-<slug>-<uid>-<run>
    world.step()
    assert world.status("team-b/secretjob")["phase"] == "Running"
    spec_file = world.write("team-a/peek", cpu=3)
    spec_hash = parse_task(spec_file.read_bytes(), file=spec_file.name).spec_hash()
    submitted = format_timestamp(datetime.fromtimestamp(world.clock() - 3600, UTC))
    _forge(
        tasks_dir / "team-a" / "peek.status.yaml",
        {
            "phase": "Starting",
            "reason": "Pending",
            "message": f"Ray job {theirs} is pending",
            "uid": their_uid,
            "run": 1,
            "submissionId": theirs,
            "specHash": spec_hash,  # the spec's own: nothing to restart for
            "rayStatus": "PENDING",
            "submittedAt": submitted,
            "queuedAt": submitted,
        },
    )
    stops: list[str] = []
    with caplog.at_level(logging.WARNING, logger="rayqueue.loop"):
        for _ in range(3):
            world.clock.advance(100)
            plan = world.reconciler.run_pass()
            assert plan is not None
            stops += [stop.submission_id for stop in plan.stops]
            status = world.status("team-a/peek")
            assert status.get("submissionId") != theirs, status  # never followed as its run
        # A task of team-a that would preempt team-a/peek's run, were it team-b's job.
        world.write("team-a/urgent", cpu=3, priority=9)
        for _ in range(3):
            world.clock.advance(100)
            plan = world.reconciler.run_pass()
            assert plan is not None
            stops += [stop.submission_id for stop in plan.stops]
    assert theirs not in stops
    assert world.ray.jobs[theirs].status == RUNNING
    shown = api.get("/tasks/team-a/peek", headers=auth("team-a")).json()
    assert theirs not in str(shown) and their_uid not in str(shown), shown
    logs = api.get("/tasks/team-a/peek/logs", headers=auth("team-a"))
    assert SECRET_LOG not in logs.text
    # The warning names the file, once: the loop's own status replaced it.
    warned = [r.getMessage() for r in caplog.records if "not a run of this task" in r.getMessage()]
    assert len(warned) == 1, warned
    assert str(tasks_dir / "team-a" / "peek.status.yaml") in warned[0]
    # team-b's task goes on as before.
    assert world.status("team-b/secretjob")["phase"] == "Running"


def test_a_forged_write_ahead_record_does_not_squat_another_teams_next_id(
    teams: tuple[World, TestClient], tasks_dir: Path
) -> None:
    """A Starting status whose id Ray does not list is submitted again (a crash between the
    write and the submit); a forged one naming team-b's next run's id must not be, or team-b's
    next run would find its id taken."""
    world, api = teams
    theirs = _run_team_b(world, api)
    uid = theirs.split("-")[-2]
    next_of_theirs = theirs.removesuffix("-1") + "-2"
    spec_file = world.write("team-a/peek")
    spec_hash = parse_task(spec_file.read_bytes(), file=spec_file.name).spec_hash()
    _forge(
        tasks_dir / "team-a" / "peek.status.yaml",
        {
            "phase": "Starting",
            "reason": "Submitted",
            "uid": uid,
            "run": 2,
            "submissionId": next_of_theirs,
            "specHash": spec_hash,
        },
    )
    world.step(3, seconds=100)
    assert next_of_theirs not in world.ray.jobs
    assert world.status("team-a/peek").get("submissionId") != next_of_theirs


def test_an_ended_run_keeps_its_record_when_its_explicit_id_changes(
    teams: tuple[World, TestClient], tasks_dir: Path
) -> None:
    """An explicit id is no part of the spec hash: editing it changes no run. A status whose
    run ended under the old id, once Ray has forgotten the job, is not a forgery to ignore:
    the task does not run again."""
    world, _ = teams
    world.write("team-a/hello", submissionId="hello-a")
    world.step(2)
    world.ray.set_status("hello-a", SUCCEEDED)
    world.step()
    assert world.status("team-a/hello")["phase"] == "Succeeded"
    world.write("team-a/hello", submissionId="hello-b")
    world.ray.delete("hello-a")  # Ray's history forgets it (retention, a new head)
    world.step(3, seconds=100)
    status = world.status("team-a/hello")
    assert status["phase"] == "Succeeded" and status["submissionId"] == "hello-a", status
    assert not world.ray.jobs  # nothing submitted again
