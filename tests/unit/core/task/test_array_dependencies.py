"""Task arrays' dependencies: an array is met when all its elements are, one element may be named
(`sweep[3]`), and names resolve in the dependent's folder first (`/name`: from the top)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.core.task.dependencies import RunView, judge
from reconciler.core.task.depnames import DependencyViews
from specs.cluster import META_TASK, SUCCEEDED
from specs.task.models import Phase, Reason
from specs.task.pipeline import DependencySpec
from tests.support.world import World

S, F, R = Phase.SUCCEEDED, Phase.FAILED, Phase.RUNNING


def _views(**phases: Phase) -> DependencyViews:
    return DependencyViews({n.replace("__", "/"): RunView(p, 10.0) for n, p in phases.items()})


def _gate(
    views: DependencyViews, dependent: str, name: str, condition: str = "Succeeded"
) -> Reason:
    deps = [DependencySpec(name=name, condition=condition)]  # type: ignore[arg-type]
    return judge(deps, views.of(dependent, deps)).gate


@pytest.mark.parametrize(
    ("elements", "condition", "gate"),
    [
        ((S, S, S), "Succeeded", Reason.DEPENDENCIES_MET),
        ((S, R, S), "Succeeded", Reason.WAITING_FOR_DEPENDENCY),
        ((S, F, R), "Succeeded", Reason.DEPENDENCY_FAILED),  # a final failure is told at once
        ((S, F, S), "Succeeded", Reason.DEPENDENCY_FAILED),
        ((F, F, F), "Failed", Reason.DEPENDENCIES_MET),
        ((F, S, F), "Failed", Reason.DEPENDENCY_FAILED),
        ((F, S, F), "Finished", Reason.DEPENDENCIES_MET),
    ],
)
def test_an_array_is_met_when_all_its_elements_are(
    elements: tuple[Phase, ...], condition: str, gate: Reason
) -> None:
    views = DependencyViews({f"sweep[{i}]": RunView(p, 10.0 + i) for i, p in enumerate(elements)})
    assert _gate(views, "report", "sweep", condition) is gate


def test_one_element_may_be_named() -> None:
    views = DependencyViews({"sweep[0]": RunView(F, 1.0), "sweep[3]": RunView(S, 2.0)})
    assert _gate(views, "report", "sweep[3]") is Reason.DEPENDENCIES_MET
    assert _gate(views, "report", "sweep[0]") is Reason.DEPENDENCY_FAILED
    assert _gate(views, "report", "sweep") is Reason.DEPENDENCY_FAILED


def test_names_resolve_in_the_dependents_folder_first() -> None:
    phases = {"prepare": F, "team-b/prepare": S, "team-c/other": S}
    views = DependencyViews({n: RunView(p, 10.0) for n, p in phases.items()})
    assert _gate(views, "team-b/train", "prepare") is Reason.DEPENDENCIES_MET  # its own folder
    assert _gate(views, "team-b/train", "/prepare") is Reason.DEPENDENCY_FAILED  # the top one
    assert _gate(views, "team-c/train", "prepare") is Reason.DEPENDENCY_FAILED  # falls back
    assert _gate(views, "train", "team-b/prepare") is Reason.DEPENDENCIES_MET
    assert _gate(views, "team-c/x", "nothing") is Reason.DEPENDENCY_MISSING


def _write(folder: Path, name: str, **spec: Any) -> None:
    doc = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": "echo", "resources": {"cpu": 1}, **spec},
    }
    path = folder / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))


def _jobs(world: World) -> dict[str, str]:
    return {j.metadata[META_TASK]: j.submission_id for j in world.our_jobs()}


def test_a_pipeline_copied_into_a_team_folder_runs_there(world: World) -> None:
    tasks = world.tasks
    _write(tasks, "team-b/prepare")
    _write(tasks, "team-b/train", dependsOn=[{"name": "prepare"}])
    world.step()
    assert set(_jobs(world)) == {"team-b/prepare"}
    world.ray.set_status(_jobs(world)["team-b/prepare"], SUCCEEDED)
    world.step(2)
    assert "team-b/train" in _jobs(world)  # not a top-level prepare


def test_a_task_waits_for_every_element_of_an_array(world: World) -> None:
    tasks = world.tasks
    _write(tasks, "sweep", array={"count": 3})
    _write(tasks, "report", dependsOn=[{"name": "sweep"}])
    _write(tasks, "first", dependsOn=[{"name": "sweep[0]"}])
    world.step()
    jobs = _jobs(world)
    assert set(jobs) == {"sweep[0]", "sweep[1]", "sweep[2]"}
    world.ray.set_status(jobs["sweep[0]"], SUCCEEDED)
    world.ray.set_status(jobs["sweep[1]"], SUCCEEDED)
    world.step(2)
    assert "first" in _jobs(world) and "report" not in _jobs(world)
    world.ray.set_status(jobs["sweep[2]"], SUCCEEDED)
    world.step(2)
    assert "report" in _jobs(world)
