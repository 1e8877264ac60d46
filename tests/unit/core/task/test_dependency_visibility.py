"""Dependencies across folders, with team tokens: a task depends on another folder's task
only if every token that reads its folder may read that task (specs.task.visibility). One it
may not see makes its spec Invalid, in the same words whether it exists or not; a relative
name stays in the folder; a visible dependency works as before; no cycle goes through a task
one of its members may not see."""

from __future__ import annotations

from dataclasses import replace

from specs.settings.process import PlanOptions
from specs.task.models import Phase, Reason
from specs.task.records import Task
from specs.task.visibility import Visibility
from tests.support.planner_world import PlanWorld, task

OWN = Visibility(readers=(("team-a",), ("team-b",)), writers=(("team-a",), ("team-b",)))
# team-a's token also reads team-b (read: own, folders [team-a, team-b]); team-b's only its own.
A_READS_B = Visibility(readers=(("team-a", "team-b"), ("team-b",)), writers=OWN.writers)


def _world(visibility: Visibility, specs: dict[str, Task | None]) -> PlanWorld:
    return PlanWorld(specs, options=replace(PlanOptions(), visibility=visibility))


def _on(target: str) -> Task:
    return task(dependsOn=[{"name": target}])


def test_a_visible_cross_folder_dependency_waits_and_then_starts() -> None:
    w = _world(A_READS_B, {"team-b/prep": task(), "team-a/train": _on("/team-b/prep")})
    w.step()
    train = w.status("team-a/train")
    assert (train.phase, train.reason) == (Phase.QUEUED, Reason.WAITING_FOR_DEPENDENCY)
    assert "team-b/prep" in (train.message or "")
    w.ray("team-b/prep", "SUCCEEDED")
    w.step()
    w.step()
    assert w.phase("team-a/train") in (Phase.STARTING, Phase.RUNNING)


def test_an_invisible_target_reads_the_same_whether_it_exists_or_not() -> None:
    said = []
    for target in ("/team-b/prep", "/team-b/nothing"):
        w = _world(OWN, {"team-b/prep": task(), "team-a/train": _on(target)})
        w.step()
        train = w.status("team-a/train")
        assert (train.phase, train.reason) == (Phase.INVALID, Reason.INVALID_SPEC)
        said.append((train.message or "").replace(target, "<target>"))
    assert said[0] == said[1] == "spec.dependsOn: '<target>' is not visible to this task's folder"


def test_a_relative_name_stays_in_the_folder_when_the_top_is_not_visible() -> None:
    w = _world(OWN, {"team-b/prep": task(), "team-a/train": _on("team-b/prep")})
    w.step()
    train = w.status("team-a/train")
    assert (train.phase, train.reason) == (Phase.QUEUED, Reason.DEPENDENCY_MISSING)
    assert train.message == "waits for team-b/prep: no such task (yet)"
    # The same name from a folder that may see team-b reaches team-b's task.
    w = _world(A_READS_B, {"team-b/prep": task(), "team-a/train": _on("team-b/prep")})
    w.step()
    assert w.status("team-a/train").reason == Reason.WAITING_FOR_DEPENDENCY


def test_without_team_tokens_another_folders_task_is_a_dependency_as_before() -> None:
    w = PlanWorld({"team-b/prep": task(), "team-a/train": _on("/team-b/prep")})
    w.step()
    assert w.status("team-a/train").reason == Reason.WAITING_FOR_DEPENDENCY


def test_a_cycle_holds_only_tasks_every_reader_of_its_members_may_see() -> None:
    # An edge goes only to a task its source may see, so whoever reads one member of a cycle
    # reads them all: the cycle's message, written to each member, names no hidden task.
    chain = Visibility(readers=(("team-a", "team-b"),), writers=OWN.writers)
    w = _world(chain, {"team-a/x": _on("/team-b/y"), "team-b/y": _on("/team-a/x")})
    w.step()
    message = "dependency cycle: team-a/x -> team-b/y -> team-a/x"
    assert w.status("team-a/x").message == w.status("team-b/y").message == message


def test_no_cycle_forms_through_an_edge_its_task_may_not_see() -> None:
    w = _world(A_READS_B, {"team-a/x": _on("/team-b/y"), "team-b/y": _on("/team-a/x")})
    w.step()
    assert w.phase("team-b/y") is Phase.INVALID  # team-b may not see team-a
    assert w.status("team-a/x").reason == Reason.WAITING_FOR_DEPENDENCY
