"""Explicit ids claimed from two folders: what the scheduler recorded decides, never a file a
team can write. A job of ours in Ray that names a task keeps the id for it; without one, the
claim the scheduler saw first keeps it; a status file counts only within its folder. A later
claimant of another folder is Invalid with a message that names no task of another folder.
Within one folder (and without team tokens) the rules and words are those of one folder."""

from __future__ import annotations

from dataclasses import replace

from reconciler.core.task.idclaims import Folders, refusals
from specs.cluster import RUNNING
from specs.settings.process import PlanOptions
from specs.task.models import Phase, Reason
from specs.task.submission_ids import SeenClaim
from specs.task.visibility import Visibility
from tests.support.planner_world import T0, PlanWorld, task

# Each team writes (and reads) its own folder only.
TEAMS = Visibility(readers=(("team-a",), ("team-b",)), writers=(("team-a",), ("team-b",)))
IN_USE = "spec.submissionId: 'b-train' is already in use; choose another id"
START = T0.timestamp()


def _seen(**ats: float) -> dict[str, SeenClaim]:
    names = {"squat": "team-a/squat", "train": "team-b/train", "other": "team-a/other"}
    return {names[key]: SeenClaim("b-train", START + at) for key, at in ats.items()}


def test_a_job_of_ours_keeps_the_id_for_its_task_though_the_squatter_was_seen_first() -> None:
    # team-a's spec was seen first (say the record was lost and the folder read again in the
    # order the files came), but Ray runs team-b's job under the id, naming team-b's task.
    folders = Folders(TEAMS, _seen(squat=0, train=5))
    got = refusals("b-train", {"team-a/squat", "team-b/train"}, set(), {"team-b/train"}, folders)
    assert got == {"team-a/squat": IN_USE}


def test_the_owners_job_in_ray_wins_over_a_squat_the_record_saw_first() -> None:
    w = PlanWorld(
        {"team-b/train": task(submissionId="b-train")},
        options=replace(PlanOptions(), visibility=TEAMS),
        seen_claims=_seen(train=0),
    )
    w.step()
    w.ray("team-b/train", RUNNING)
    w.step()
    # The record says team-a's claim came first (a record lost, the folder read again).
    w.specs["team-a/squat"] = task(priority=9, cpu=4, submissionId="b-train")
    w.seen_claims = _seen(squat=-10, train=0)
    for _ in range(2):
        p = w.step()
        assert not p.submits and not p.stops
    squat = w.status("team-a/squat")
    assert (squat.phase, squat.reason, squat.message) == (
        Phase.INVALID,
        Reason.INVALID_SPEC,
        IN_USE,
    )
    assert w.phase("team-b/train") is Phase.RUNNING
    assert w.submitted == ["b-train"]


def test_a_forged_sidecar_does_not_make_its_folder_the_keeper() -> None:
    # team-a's sidecar records a run under the id; team-b's claim was seen first.
    folders = Folders(TEAMS, _seen(train=0, squat=30))
    got = refusals("b-train", {"team-a/squat", "team-b/train"}, {"team-a/squat"}, set(), folders)
    assert got == {"team-a/squat": IN_USE}


def test_the_claim_seen_first_keeps_the_id_and_the_later_one_names_no_other_folder() -> None:
    w = PlanWorld(
        {"team-b/train": task(submissionId="b-train")},
        capacity=None,  # Ray unread: nothing starts, team-b's task only waits
        options=replace(PlanOptions(), visibility=TEAMS),
    )
    w.seen_claims = _seen(train=0)
    w.step()
    w.specs["team-a/squat"] = task(priority=9, submissionId="b-train")
    w.seen_claims = _seen(train=0, squat=1)
    w.step()
    assert w.phase("team-b/train") is not Phase.INVALID
    assert w.status("team-a/squat").message == IN_USE
    assert "team-b" not in str(w.statuses["team-a/squat"])


def test_claims_of_two_folders_seen_at_once_are_all_refused_without_a_name() -> None:
    folders = Folders(TEAMS, _seen(squat=0, train=0))
    got = refusals("b-train", {"team-a/squat", "team-b/train"}, set(), set(), folders)
    assert got == {"team-a/squat": IN_USE, "team-b/train": IN_USE}


def test_within_one_folder_the_run_recorded_keeps_the_id_and_is_named() -> None:
    folders = Folders(TEAMS, _seen(squat=0, other=9))
    got = refusals("b-train", {"team-a/squat", "team-a/other"}, {"team-a/other"}, set(), folders)
    assert got == {
        "team-a/squat": (
            "spec.submissionId: 'b-train' is already used by task team-a/other; choose another id"
        )
    }


def test_within_one_folder_two_new_claims_are_both_refused_naming_each_other() -> None:
    folders = Folders(TEAMS, _seen(squat=0, other=9))
    got = refusals("b-train", {"team-a/squat", "team-a/other"}, set(), set(), folders)
    assert got["team-a/squat"] == (
        "spec.submissionId: 'b-train' is claimed by task team-a/other as well and none has run "
        "with it yet; rename all but one"
    )
    assert set(got) == {"team-a/squat", "team-a/other"}


def test_without_team_tokens_every_folder_is_one_as_before() -> None:
    # No Visibility: a sidecar's run keeps the id across paths, and the keeper is named.
    got = refusals("b-train", {"team-a/squat", "team-b/train"}, {"team-a/squat"}, set())
    assert got == {
        "team-b/train": (
            "spec.submissionId: 'b-train' is already used by task team-a/squat; choose another id"
        )
    }


def test_a_job_held_across_folders_is_named_only_within_one() -> None:
    folders = Folders(TEAMS)
    got = refusals("b-train", {"team-a/squat", "team-a/other"}, set(), {"team-b/train"}, folders)
    assert got == {"team-a/squat": IN_USE, "team-a/other": IN_USE}
    mine = refusals("b-train", {"team-a/squat"}, set(), {"team-a/other"}, folders)
    assert "team-a/other" in mine["team-a/squat"]
