"""Nested queues: the cluster's admin keeps the top `_queues.yaml`; an `admin` token
scoped to team-a (`folders: [team-a]`) edits `team-a/_queues.yaml` and nothing above it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.app import create_app
from specs.settings.process import Settings
from specs.tenancy.access import Principal, Role, hash_token
from tests.api.conftest import BASE_URL, TestClient, snapshot, task_json, task_yaml

TOKENS: dict[str, tuple[str, str, list[str] | None]] = {
    "platform": ("tok-admin-4f6a21", "admin", None),
    "team-a-admin": ("tok-team-a-admin-0d9c3b", "admin", ["team-a"]),
    "team-a-ci": ("tok-team-a-5b1d8e", "write", ["team-a"]),
}

TOP = b"apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n    - name: team-a\n"
SUB = (
    b"# team-a's own division\napiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n"
    b"  queues:\n    - name: team-a/x\n      weight: 2\n    - name: team-a/y\n"
)


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who][0]}"}


@pytest.fixture
def client(tmp_path: Path, tasks_dir: Path) -> Iterator[TestClient]:
    entries = []
    for name, (token, role, folders) in TOKENS.items():
        entry: dict[str, Any] = {"name": name, "sha256": hash_token(token), "role": role}
        if folders is not None:
            entry["folders"] = folders
        entries.append(entry)
    path = tmp_path / "tokens.yaml"
    path.write_text(yaml.safe_dump({"tokens": entries}))
    path.chmod(0o600)
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
        (tasks_dir / team / "train.yaml").write_text(task_yaml())
    (tasks_dir / "_queues.yaml").write_bytes(TOP)
    settings = Settings(tasks_dir=tasks_dir, team_tokens=path)
    with TestClient(create_app(settings), base_url=BASE_URL) as c:
        yield c


def test_a_teams_admin_edits_its_own_queue_file(client: TestClient, tasks_dir: Path) -> None:
    a = auth("team-a-admin")
    assert client.put("/config/team-a/_queues.yaml", content=SUB, headers=a).status_code == 201
    assert (tasks_dir / "team-a" / "_queues.yaml").read_bytes() == SUB  # byte for byte
    got = client.get("/config/team-a/_queues.yaml", headers=a)
    assert got.status_code == 200 and got.content == SUB
    # Its tasks too, like a write token of team-a.
    assert client.put("/tasks/team-a/new", json=task_json(), headers=a).status_code == 201


def test_a_teams_admin_reaches_nothing_above_its_folder(
    client: TestClient, tasks_dir: Path
) -> None:
    a = auth("team-a-admin")
    before = snapshot(tasks_dir)
    assert client.put("/config/_queues.yaml", content=TOP, headers=a).status_code == 403
    assert client.delete("/config/_queues.yaml", headers=a).status_code == 403
    other = SUB.replace(b"team-a/", b"team-b/")
    assert client.put("/config/team-b/_queues.yaml", content=other, headers=a).status_code == 403
    assert client.put("/tasks/team-b/new", json=task_json(), headers=a).status_code == 403
    assert snapshot(tasks_dir) == before


def test_a_write_token_may_not_divide_its_queue(client: TestClient, tasks_dir: Path) -> None:
    response = client.put("/config/team-a/_queues.yaml", content=SUB, headers=auth("team-a-ci"))
    assert response.status_code == 403
    assert not (tasks_dir / "team-a" / "_queues.yaml").exists()


def test_the_cluster_admin_edits_every_queue_file(client: TestClient, tasks_dir: Path) -> None:
    p = auth("platform")
    assert client.put("/config/team-a/_queues.yaml", content=SUB, headers=p).status_code == 201
    assert client.delete("/config/team-a/_queues.yaml", headers=p).status_code == 204


def test_a_queue_file_is_checked_as_the_loop_reads_it(client: TestClient, tasks_dir: Path) -> None:
    a = auth("team-a-admin")
    outside = SUB.replace(b"team-a/y", b"team-b/y")
    bad = client.put("/config/team-a/_queues.yaml", content=outside, headers=a)
    assert bad.status_code == 422
    (error,) = bad.json()["detail"]
    assert (error["field"], error["line"], error["column"]) == ("spec.queues[1].name", 8, 13)
    assert "outside team-a/" in error["msg"]
    for file in ("team-a/_other.yaml", "team-a/..%2F_queues.yaml", "team-a/.h/_queues.yaml"):
        assert client.put(f"/config/{file}", content=SUB, headers=a).status_code in (400, 403, 404)
    assert not (tasks_dir / "team-a" / "_queues.yaml").exists()


@pytest.mark.parametrize(
    ("folders", "name", "expected"),
    [
        (("team-a",), "team-a/_queues.yaml", True),
        (("team-a",), "team-a/x/_queues.yaml", True),
        (("team-a",), "_queues.yaml", False),
        (("team-a",), "team-b/_queues.yaml", False),
        (("team-a/x",), "team-a/_queues.yaml", False),
        (("team-a",), "team-a/job", True),
        (("team-a",), "_other.yaml", False),
    ],
)
def test_a_scoped_admins_reach(folders: tuple[str, ...], name: str, expected: bool) -> None:
    assert Principal("p", Role.ADMIN, folders).can_write(name) is expected
    assert Principal("w", Role.WRITE, folders).can_write("team-a/_queues.yaml") is False


def test_queues_lists_the_tree_and_a_parents_max_queued_bounds_its_sub_queues(
    client: TestClient, tasks_dir: Path
) -> None:
    status = {
        "apiVersion": "rayqueue/v1",
        "kind": "QueueStatus",
        "status": {
            "config": {"file": "_queues.yaml", "valid": True, "inForce": True},
            "queues": [
                {"name": "team-a", "pending": 2, "maxQueued": 2},
                {"name": "team-a/x", "parent": "team-a", "pending": 0},
                {"name": "default", "pending": 0},
            ],
        },
    }
    (tasks_dir / "_queues.status.yaml").write_text(yaml.safe_dump(status))
    items = client.get("/queues", headers=auth("platform")).json()["items"]
    assert [(q["name"], q.get("parent")) for q in items] == [
        ("team-a", None),
        ("team-a/x", "team-a"),
        ("default", None),
    ]
    full = client.put("/tasks/team-a/x/new", json=task_json(), headers=auth("team-a-ci"))
    assert full.status_code == 429 and "queue team-a is full" in full.text


def test_a_deeper_queue_file_is_checked_inside_the_whole_tree(
    client: TestClient, tasks_dir: Path
) -> None:
    """team-a's file lists team-a/x/p already: team-a/x's own file may not list it again (the
    loop would refuse the whole tree and keep the last good one), though alone it is right."""
    a = auth("team-a-admin")
    divided = SUB.replace(b"    - name: team-a/y\n", b"    - name: team-a/x/p\n")
    assert client.put("/config/team-a/_queues.yaml", content=divided, headers=a).status_code == 201
    deeper = (
        b"apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n"
        b"    - name: team-a/x/q\n    - name: team-a/x/p\n"
    )
    bad = client.put("/config/team-a/x/_queues.yaml", content=deeper, headers=a)
    assert bad.status_code == 422, bad.text
    (error,) = bad.json()["detail"]
    assert (error["field"], error["line"]) == ("spec.queues[1].name", 6)
    assert "listed in another _queues.yaml" in error["msg"]
    assert not (tasks_dir / "team-a" / "x" / "_queues.yaml").exists()
    alone = deeper.replace(b"    - name: team-a/x/p\n", b"")
    ok = client.put("/config/team-a/x/_queues.yaml", content=alone, headers=a)
    assert ok.status_code == 201


def test_an_edit_right_in_itself_is_taken_while_another_teams_file_is_broken(
    client: TestClient, tasks_dir: Path
) -> None:
    (tasks_dir / "_queues.yaml").write_bytes(TOP + b"    - name: team-b\n")
    (tasks_dir / "team-b" / "_queues.yaml").write_bytes(b"spec: [")  # team-b's to fix
    a = auth("team-a-admin")
    assert client.put("/config/team-a/_queues.yaml", content=SUB, headers=a).status_code == 201
