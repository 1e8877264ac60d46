"""Explicit submission ids claimed by a file: a spec (or a forged sidecar) a team commits into
its own folder claiming another folder's explicit `submissionId` must not make that task
Invalid, nor tell the claimant which task holds the id. The API refuses the same claim with a
409; the folder must hold the same line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from reconciler.shell.loop.seenclaims import SeenClaims
from specs.cluster import RUNNING
from tests.api.conftest import task_json
from tests.support.specs import write_task
from tests.support.world import World
from tests.tenancy.conftest import auth

CLAIMED = "b-train"


def _queued_team_b_task(world: World, api: TestClient) -> None:
    """team-b/train asks for its explicit id and waits behind a job that fills the cluster."""
    b = auth("team-b")
    assert api.put("/tasks/team-b/hog", json=task_json(cpu=4), headers=b).is_success
    world.step(2)
    train = task_json(submissionId=CLAIMED)
    assert api.put("/tasks/team-b/train", json=train, headers=b).is_success
    world.step(2)
    assert world.status("team-b/train")["phase"] == "Queued"


def _forged_sidecar(path: Path, spec_hash: str) -> None:
    """A finished run of team-a/squat under the claimed id. The spec is the same as team-b's,
    so its hash is too: the loop takes the sidecar for its own."""
    status = {"phase": "Succeeded", "reason": "Succeeded", "run": 1, "submissionId": CLAIMED}
    status |= {"uid": "deadbeef", "specHash": spec_hash}
    document = {
        "apiVersion": "rayqueue/v1",
        "kind": "TaskStatus",
        "metadata": {"name": "team-a/squat"},
        "status": status,
    }
    path.write_text(yaml.safe_dump(document))


@pytest.mark.parametrize("with_sidecar", [False, True], ids=["spec", "spec-and-forged-sidecar"])
def test_a_claim_by_file_does_not_invalidate_another_folders_task(
    teams: tuple[World, TestClient], tasks_dir: Path, with_sidecar: bool
) -> None:
    world, api = teams
    _queued_team_b_task(world, api)
    # team-a commits into its own folder, without the API and its 409.
    write_task(tasks_dir / "team-a", "squat", submissionId=CLAIMED)
    if with_sidecar:
        spec_hash = str(world.status("team-b/train")["specHash"])
        _forged_sidecar(tasks_dir / "team-a" / "squat.status.yaml", spec_hash)
    world.step(2, seconds=100)
    owner = world.status("team-b/train")
    assert owner["phase"] == "Queued", owner
    claimant = world.status("team-a/squat")
    assert claimant["phase"] == "Invalid", claimant
    assert "team-b" not in str(claimant.get("message")), claimant
    shown = api.get("/tasks/team-a/squat", headers=auth("team-a")).text
    assert "team-b" not in shown, shown


def test_the_owners_job_keeps_its_id_when_a_squat_is_seen_no_later(
    teams: tuple[World, TestClient], tasks_dir: Path
) -> None:
    """team-b's run holds the id in Ray. The loop's record of first-seen claims is lost, so
    the squat committed meanwhile is seen no later than team-b's claim: the job of ours that
    names team-b's task decides."""
    world, api = teams
    b = auth("team-b")
    assert api.put(
        "/tasks/team-b/train", json=task_json(submissionId=CLAIMED), headers=b
    ).is_success
    world.step(2)
    world.ray.set_status(CLAIMED, RUNNING)
    world.step()
    assert world.status("team-b/train")["phase"] == "Running"
    world.reconciler.seen_claims = SeenClaims(None)  # as after a lost state folder
    write_task(tasks_dir / "team-a", "squat", submissionId=CLAIMED)
    world.step(2, seconds=100)
    assert world.status("team-b/train")["phase"] == "Running"
    claimant = world.status("team-a/squat")
    assert claimant["phase"] == "Invalid"
    assert claimant["message"] == (
        f"spec.submissionId: {CLAIMED!r} is already in use; choose another id"
    )


def test_a_claim_within_one_folder_names_the_keeper_as_before(
    teams: tuple[World, TestClient], tasks_dir: Path
) -> None:
    world, api = teams
    _queued_team_b_task(world, api)
    write_task(tasks_dir / "team-b", "copy", submissionId=CLAIMED)
    world.step(2, seconds=100)
    # Neither has run with it: both are refused, each naming the other (one folder).
    assert world.status("team-b/copy")["message"] == (
        f"spec.submissionId: {CLAIMED!r} is claimed by task team-b/train as well and none has "
        "run with it yet; rename all but one"
    )
    assert world.status("team-b/train")["phase"] == "Invalid"
