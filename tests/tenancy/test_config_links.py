"""`/config` and symlinks: a team admin may edit the queue files under its own folder, and a
link it plants there (`team-a/y -> ..`, `team-a/z -> ../team-b`) must not lead it to the top
`_queues.yaml` (every quota and the decayed usage) or to another team's file. Paths are
checked after resolving links, as the task routes check them."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import snapshot
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
@pytest.mark.xfail(strict=True, reason="/config follows a symlink out of the caller's folder")
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
