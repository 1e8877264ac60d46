"""`dependsOn` must not be an oracle: a team that reads only its own folder learns nothing of
another folder's tasks by depending on them. The status of a task depending on another
folder's task must read the same whether that task exists (and whatever its phase) or not."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.api.conftest import task_json
from tests.support.world import World
from tests.tenancy.conftest import auth

EXISTING = "team-b/secretjob"
MISSING = "team-b/nosuchjob"


def _shown(api: TestClient, name: str, dependency: str) -> dict[str, Any]:
    """What team-a sees of its own task: phase, reason, message, the dependency's name
    replaced, so that only what differs between the two dependencies remains."""
    got = api.get(f"/tasks/{name}", headers=auth("team-a"))
    assert got.status_code == 200, got.text
    status = got.json()["status"]
    keys = ("phase", "reason", "message", "conditions")
    return {k: str(status.get(k)).replace(dependency, "<dependency>") for k in keys}


def test_depending_on_another_folder_reveals_nothing(teams: tuple[World, TestClient]) -> None:
    world, api = teams
    b = auth("team-b")
    assert api.put(f"/tasks/{EXISTING}", json=task_json(), headers=b).is_success
    world.step(2)
    # team-a may not read team-b's folder: the API says "no task" for both names.
    for name in (EXISTING, MISSING):
        assert api.get(f"/tasks/{name}", headers=auth("team-a")).status_code == 404
    a = auth("team-a")
    for probe, dependency in (("probe-1", EXISTING), ("probe-2", MISSING)):
        body = task_json(dependsOn=[{"name": dependency}])
        assert api.put(f"/tasks/team-a/{probe}", json=body, headers=a).is_success
    world.step(2)
    assert _shown(api, "team-a/probe-1", EXISTING) == _shown(api, "team-a/probe-2", MISSING)


def test_a_dependency_from_the_top_on_another_folder_is_invalid_whether_it_exists_or_not(
    teams: tuple[World, TestClient],
) -> None:
    world, api = teams
    assert api.put(f"/tasks/{EXISTING}", json=task_json(), headers=auth("team-b")).is_success
    world.step(2)
    a = auth("team-a")
    for probe, dependency in (("probe-1", EXISTING), ("probe-2", MISSING)):
        body = task_json(dependsOn=[{"name": f"/{dependency}"}])
        assert api.put(f"/tasks/team-a/{probe}", json=body, headers=a).is_success
    world.step(2)
    shown = _shown(api, "team-a/probe-1", EXISTING)
    assert shown == _shown(api, "team-a/probe-2", MISSING)
    assert shown["phase"] == "Invalid"
    assert shown["message"] == (
        "spec.dependsOn: '/<dependency>' is not visible to this task's folder"
    ), shown
    # The sidecars team-a reads by git say the same, byte for byte but the name.
    files = [
        (world.tasks / "team-a" / f"{probe}.status.yaml")
        .read_text()
        .replace(dependency, "<d>")
        .replace(probe, "<probe>")
        for probe, dependency in (("probe-1", EXISTING), ("probe-2", MISSING))
    ]
    assert files[0] == files[1]
