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
