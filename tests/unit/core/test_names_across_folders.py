"""A status never names a task its folder may not see (specs.task.visibility): a wait behind
another folder's task, a preemption by or of one, say "a task of another folder"; within a
folder, and without team tokens, the words name the task as before."""

from __future__ import annotations

from dataclasses import replace

from specs.cluster import RUNNING
from specs.settings.process import PlanOptions
from specs.task.models import Phase
from specs.task.visibility import Visibility
from tests.support.planner_world import Cluster, PlanWorld, task

OWN = Visibility(readers=(("team-a",), ("team-b",)), writers=(("team-a",), ("team-b",)))


def _behind(visibility: Visibility, front: str) -> str:
    """team-b/small's message: it fits, but a strict queue's head (`front`) does not yet."""
    w = PlanWorld(
        {"team-b/hog": task(cpu=3)},
        options=replace(PlanOptions(policy="strict"), visibility=visibility),
    )
    w.step()
    w.ray("team-b/hog", RUNNING)
    w.specs[front] = task(priority=5, cpu=4)
    w.specs["team-b/small"] = task()
    w.step()
    assert w.phase("team-b/small") is Phase.QUEUED
    return w.status("team-b/small").message or ""


def test_a_wait_behind_another_folders_task_does_not_name_it() -> None:
    assert _behind(OWN, "team-a/big").startswith("waits behind a task of another folder")
    assert "team-a" not in _behind(OWN, "team-a/big")


def test_a_wait_behind_a_task_of_its_own_folder_or_without_tokens_names_it() -> None:
    assert _behind(OWN, "team-b/big").startswith("waits behind team-b/big")
    assert _behind(Visibility(), "team-a/big").startswith("waits behind team-a/big")


def _preempted(visibility: Visibility) -> tuple[str, str]:
    """The victim's message and the preemptor's, when team-b's urgent task takes team-a's
    place (one queue, preemption within it)."""
    options = PlanOptions(preemption="LowerPriority", preemption_grace_seconds=0)
    w = Cluster(
        {"team-a/low": task(priority=0, cpu=4)},
        options=replace(options, visibility=visibility),
    )
    w.step()
    w.ray("team-a/low", RUNNING)
    w.step(seconds=600)
    w.specs["team-b/urgent"] = task(priority=9, cpu=4)
    plan = w.step()
    assert plan.preemptions, plan
    return w.status("team-a/low").message or "", w.status("team-b/urgent").message or ""


def test_a_preemption_across_folders_names_neither_side_to_the_other() -> None:
    victim, preemptor = _preempted(OWN)
    assert victim.startswith("preempted by a task of another folder (priority 9)"), victim
    assert preemptor.startswith("preempting a task of another folder (priority 0"), preemptor
    assert "team-b" not in victim and "team-a" not in preemptor


def test_a_preemption_without_team_tokens_names_both_as_before() -> None:
    victim, preemptor = _preempted(Visibility())
    assert victim.startswith("preempted by team-b/urgent (priority 9)"), victim
    assert preemptor.startswith("preempting team-a/low (priority 0"), preemptor
