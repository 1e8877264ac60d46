"""Id squatting through files: an explicit submissionId another task has used, or
also claims, makes the spec Invalid; the task that has used it keeps it and is never stopped."""

from __future__ import annotations

from specs.cluster import RUNNING, RayJob
from specs.task.models import ConditionType, Phase, Reason
from tests.support.planner_world import PlanWorld, task


def test_a_p9_spec_with_a_running_tasks_id_is_invalid_and_the_owner_runs_on() -> None:
    w = PlanWorld({"team-b/train": task(priority=1, submissionId="b-train")})
    w.step()
    w.ray("team-b/train", RUNNING)
    w.step()
    assert w.status("team-b/train").submission_id == "b-train"
    # Team A drops in a priority-9 spec naming B's id: it would take the id first otherwise.
    w.specs["team-a/squat"] = task(priority=9, cpu=4, submissionId="b-train")
    for _ in range(3):
        p = w.step()
        assert not any(s.task == "team-a/squat" for s in p.submits)
        assert not p.stops
    squat = w.status("team-a/squat")
    assert (squat.phase, squat.reason) == (Phase.INVALID, Reason.INVALID_SPEC)
    assert squat.message == (
        "spec.submissionId: 'b-train' is already used by task team-b/train; choose another id"
    )
    assert w.phase("team-b/train") is Phase.RUNNING
    assert w.submitted == ["b-train"]


def test_the_owner_of_a_finished_run_still_starts_its_next_run_under_its_id() -> None:
    w = PlanWorld({"team-b/train": task(submissionId="b-train")})
    w.step()
    w.ray("team-b/train", "SUCCEEDED")
    w.step()
    w.specs["team-a/squat"] = task(priority=9, submissionId="b-train")
    w.step()
    # B is edited: a new run, under b-train-2; A stays Invalid and is never submitted.
    w.specs["team-b/train"] = task(submissionId="b-train", entrypoint="python v2.py")
    w.step()
    w.step()
    assert w.submitted == ["b-train", "b-train-2"]
    assert w.phase("team-a/squat") is Phase.INVALID
    # Claiming a later run's id is squatting as well.
    w.specs["team-a/squat"] = task(priority=9, submissionId="b-train-2")
    w.step()
    assert "already used by task team-b/train" in (w.status("team-a/squat").message or "")


def test_two_new_claims_of_one_id_are_both_invalid_until_one_is_renamed() -> None:
    w = PlanWorld({"a": task(submissionId="same"), "b": task(submissionId="same")})
    p = w.step()
    assert not p.submits
    assert w.status("a").message == (
        "spec.submissionId: 'same' is claimed by task b as well and none has run with it yet; "
        "rename all but one"
    )
    assert w.phase("b") is Phase.INVALID
    w.specs["b"] = task(submissionId="other")
    w.step()
    w.step()
    assert sorted(w.submitted) == ["other", "same"]


def test_a_running_claimant_is_never_stopped_by_the_rule() -> None:
    # Two tasks already run (say, one squatted before this rule): the one whose job holds the
    # id keeps it; the other runs on under a SpecInvalid condition, and is not started again.
    w = PlanWorld({"a": task(submissionId="x"), "b": task(submissionId="y")})
    w.step()
    w.ray("a", RUNNING)
    w.ray("b", RUNNING)
    w.step()
    w.specs["b"] = task(submissionId="x")  # b now claims a's id, while its own run goes on
    p = w.step()
    assert not p.stops and not p.submits
    assert w.phase("a") is Phase.RUNNING and w.phase("b") is Phase.RUNNING
    (cond,) = w.status("b").conditions
    assert cond.reason == ConditionType.SPEC_INVALID
    assert "'x' is already used by task a" in cond.message
    w.ray("b", "SUCCEEDED")
    w.step()
    assert w.phase("b") is Phase.SUCCEEDED  # the run's outcome is recorded, as under a broken file
    w.step()
    assert w.phase("b") is Phase.INVALID
    assert w.submitted == ["x", "y"]


def test_a_job_of_this_queue_holding_the_id_wins_over_a_sidecar() -> None:
    w = PlanWorld({"a": task(submissionId="x")})
    w.step()
    # Status files lost; Ray still has a's job under x. b claims x: a's job decides.
    w.statuses.clear()
    w.specs["b"] = task(priority=9, submissionId="x")
    w.step()
    assert w.phase("b") is Phase.INVALID
    assert "already used by task a" in (w.status("b").message or "")
    assert w.submitted == ["x"]


def test_a_foreign_job_holding_the_id_is_still_a_submission_id_conflict() -> None:
    w = PlanWorld({"a": task(submissionId="taken")})
    w.step()
    # Ray answered the submit with a conflict: the id is someone else's, outside rayqueue.
    w.jobs["taken"] = RayJob("taken", RUNNING, metadata={})
    w.step()
    body = w.status("a")
    assert (body.phase, body.reason) == (Phase.FAILED, Reason.SUBMISSION_ID_CONFLICT)
    assert w.jobs["taken"].status == RUNNING
