"""When a task of team-b preempts team-a's run, team-a's status (its sidecar in team-a's
folder, the API's task view, the web view's rows) never names team-b's task: `preemptedBy`
holds a reference only the scheduler resolves. The preemption still runs its course, over the
real store and loop."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from specs.cluster import RUNNING, SUCCEEDED
from specs.task.visibility import ANOTHER_FOLDER
from tests.support.world import World
from tests.tenancy.conftest import auth


def _seen_by_team_a(world: World, api: TestClient, tasks_dir: Path) -> str:
    """Everything team-a reads of its task: the sidecar, the task view, the web view's rows."""
    sidecar = (tasks_dir / "team-a" / "low.status.yaml").read_text()
    view = api.get("/tasks/team-a/low", headers=auth("team-a"))
    rows = api.get("/ui/api/tasks", headers=auth("team-a"))
    assert view.status_code == 200 and rows.status_code == 200
    return sidecar + view.text + rows.text


def test_a_preemption_by_another_folder_is_not_named_in_the_victims_status(
    make_world: Callable[..., tuple[World, TestClient]],
    tasks_dir: Path,
    tokens_file: Path,
) -> None:
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
    world, api = make_world(team_tokens=tokens_file, preemption="LowerPriority")
    world.write("team-a/low", cpu=4)
    world.step(2)
    low_run = str(world.status("team-a/low")["submissionId"])
    world.ray.set_status(low_run, RUNNING)
    world.step(2, seconds=600)
    assert world.status("team-a/low")["phase"] == "Running"
    world.write("team-b/urgent", cpu=4, priority=9)
    world.step()
    victim = world.status("team-a/low")
    assert victim.get("preemptions") == 1, victim
    assert str(victim["preemptedBy"]).startswith(ANOTHER_FOLDER), victim
    seen = _seen_by_team_a(world, api, tasks_dir)
    assert "team-b" not in seen and "urgent" not in seen, seen
    # The victim's run stops, the preemptor starts, the victim runs again after it.
    for _ in range(4):
        world.step(seconds=5)
        if world.status("team-b/urgent")["phase"] != "Queued":
            break
        assert "team-b" not in _seen_by_team_a(world, api, tasks_dir)
    urgent = world.status("team-b/urgent")
    assert urgent["phase"] in ("Starting", "Running"), urgent
    assert world.ray.jobs[low_run].status != RUNNING
    world.ray.set_status(str(urgent["submissionId"]), SUCCEEDED)
    world.step(3, seconds=5)
    again = world.status("team-a/low")
    assert again["phase"] in ("Starting", "Running") and again.get("run") == 2, again
    assert "preemptedBy" not in again
    # team-b reads its own task by name as ever.
    mine = api.get("/tasks/team-b/urgent", headers=auth("team-b"))
    assert mine.status_code == 200 and mine.json()["status"]["phase"] == "Succeeded"
