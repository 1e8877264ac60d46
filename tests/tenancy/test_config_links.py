"""`/config` and symlinks: a team admin may edit the queue files under its own folder, and a
link it plants there (`team-a/y -> ..`, `team-a/z -> ../team-b`) must not lead it to the top
`_queues.yaml` (every quota and the decayed usage) or to another team's file. Paths are
checked after resolving links, as the task routes check them."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import snapshot, task_json
from tests.support.world import World
from tests.tenancy.conftest import auth

TOP = b"apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n    - name: team-a\n"
TEAM_B_OWN = b"apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n    - name: team-b/p\n"
EDIT = b"apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues: []\n"

# (link under team-a/, where it points, the file it would reach)
LINKS = [("y", "..", "_queues.yaml"), ("z", "../team-b", "team-b/_queues.yaml")]


@pytest.fixture
def linked(teams: tuple[World, TestClient], tasks_dir: Path) -> TestClient:
    (tasks_dir / "_queues.yaml").write_bytes(TOP + b"    - name: team-b\n")
    (tasks_dir / "team-b" / "_queues.yaml").write_bytes(TEAM_B_OWN)
    for link, target, _ in LINKS:
        (tasks_dir / "team-a" / link).symlink_to(target, target_is_directory=True)
    _, api = teams
    return api


def test_the_files_themselves_are_out_of_reach(linked: TestClient) -> None:
    """What the links below lead around."""
    a = auth("team-a-admin")
    assert linked.get("/config/_queues.yaml", headers=a).status_code == 403
    assert linked.get("/config/team-b/_queues.yaml", headers=a).status_code == 403


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
@pytest.mark.parametrize(("link", "reached"), [(link, file) for link, _, file in LINKS])
def test_a_link_does_not_lead_a_team_admin_to_another_queue_file(
    linked: TestClient, tasks_dir: Path, link: str, reached: str, method: str
) -> None:
    secret = (tasks_dir / reached).read_bytes()
    before = snapshot(tasks_dir)
    body = EDIT if method == "PUT" else None
    response = linked.request(
        method, f"/config/team-a/{link}/_queues.yaml", content=body, headers=auth("team-a-admin")
    )
    assert response.status_code in (403, 404), (response.status_code, response.text)
    assert secret not in response.content
    assert snapshot(tasks_dir) == before


TEAM_A_OWN = b"apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n    - name: team-a/p\n"


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_a_dangling_link_out_of_the_folder_is_refused(
    linked: TestClient, tasks_dir: Path, method: str
) -> None:
    """A link to a folder that does not exist yet: a PUT through it would create the file
    where it points (team-b/new/), so it is judged by where it points."""
    before = snapshot(tasks_dir)
    link = tasks_dir / "team-a" / "d"
    link.symlink_to("../team-b/new", target_is_directory=True)
    body = TEAM_A_OWN if method == "PUT" else None
    response = linked.request(
        method, "/config/team-a/d/_queues.yaml", content=body, headers=auth("team-a-admin")
    )
    assert response.status_code == 403, (response.status_code, response.text)
    assert "outside its folders" in response.json()["detail"]
    link.unlink()
    assert snapshot(tasks_dir) == before
    assert not (tasks_dir / "team-b" / "new").exists()


def test_a_loop_of_links_is_refused(linked: TestClient, tasks_dir: Path) -> None:
    """Where a loop leads cannot be known: refused, not followed."""
    (tasks_dir / "team-a" / "loop").symlink_to("loop")
    response = linked.put(
        "/config/team-a/loop/_queues.yaml", content=TEAM_A_OWN, headers=auth("team-a-admin")
    )
    assert response.status_code == 403, response.text


def test_the_team_admin_still_edits_its_own_queue_file(linked: TestClient, tasks_dir: Path) -> None:
    a = auth("team-a-admin")
    own = tasks_dir / "team-a" / "_queues.yaml"
    assert (
        linked.put("/config/team-a/_queues.yaml", content=TEAM_A_OWN, headers=a).status_code == 201
    )
    assert own.read_bytes() == TEAM_A_OWN
    got = linked.get("/config/team-a/_queues.yaml", headers=a)
    assert (got.status_code, got.content) == (200, TEAM_A_OWN)
    assert linked.delete("/config/team-a/_queues.yaml", headers=a).status_code == 204
    assert not own.exists()


def test_a_link_that_stays_in_the_folder_is_followed(linked: TestClient, tasks_dir: Path) -> None:
    """A team's own link inside its folder is its business: the task routes and /config follow
    it, since it leads nowhere the token could not go by name."""
    (tasks_dir / "team-a" / "real").mkdir()
    (tasks_dir / "team-a" / "alias").symlink_to("real", target_is_directory=True)
    created = linked.put("/tasks/team-a/alias/job", json=task_json(), headers=auth("team-a"))
    assert created.status_code == 201, created.text
    assert (tasks_dir / "team-a" / "real" / "job.yaml").is_file()
    assert linked.get("/tasks/team-a/alias/job", headers=auth("team-a")).status_code == 200


def test_the_top_admin_is_not_confined_to_a_folder(linked: TestClient, tasks_dir: Path) -> None:
    """The platform's admin may follow a link anywhere inside the tasks folder."""
    got = linked.get("/config/team-a/z/_queues.yaml", headers=auth("platform"))
    assert (got.status_code, got.content) == (200, TEAM_B_OWN)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_the_task_routes_refuse_a_link_to_a_sibling_team(
    linked: TestClient, tasks_dir: Path, method: str
) -> None:
    """The same check, on the task routes: team-a/z is team-b's folder."""
    (tasks_dir / "team-b" / "job.yaml").write_bytes(b"kind: Task\n")
    before = snapshot(tasks_dir)
    body = task_json() if method == "PUT" else None
    response = linked.request(method, "/tasks/team-a/z/job", json=body, headers=auth("team-a"))
    assert response.status_code in (403, 404), (response.status_code, response.text)
    assert snapshot(tasks_dir) == before
