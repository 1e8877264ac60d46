"""RuntimeEnv paths through the API: a team token may name runtimeEnv local paths only under
its own roots (workingDirRoots, plus --working-dir-root); anything else is a 403 naming the
field, and nothing is written. Without team tokens or roots, the API accepts any path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.app import create_app
from specs.settings.process import Settings
from specs.tenancy.access import hash_token
from tests.api.conftest import BASE_URL, SEED_BODY, TestClient, snapshot, task_json, task_yaml

TOKENS = {
    "team-a": "tok-team-a-5b1d8e0c",
    "team-b": "tok-team-b-77c2a0f1",
    "ops": "tok-ops-c81e55aa",
}


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who]}"}


@pytest.fixture
def code(tmp_path: Path) -> Path:
    root = tmp_path / "code" / "team-a"
    (root / "proj").mkdir(parents=True)
    (root / "proj" / "main.py").write_text("print('hi')\n")
    return root


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """Stands in for /etc/rayqueue: what the scheduler can read and no team may."""
    path = tmp_path / "etc" / "rayqueue"
    path.mkdir(parents=True)
    (path / "admin-token").write_text("s3cr3t\n")
    return path


@pytest.fixture
def teams(tmp_path: Path, tasks_dir: Path, code: Path) -> Iterator[TestClient]:
    entries: list[dict[str, Any]] = [
        {"name": "team-a", "sha256": hash_token(TOKENS["team-a"]), "role": "write",
         "folders": ["team-a"], "workingDirRoots": [str(code)]},
        {"name": "team-b", "sha256": hash_token(TOKENS["team-b"]), "role": "write",
         "folders": ["team-b"]},
        {"name": "ops", "sha256": hash_token(TOKENS["ops"]), "role": "write", "folders": ["/"],
         "workingDirRoots": [str(code)]},
    ]  # fmt: skip
    path = tmp_path / "tokens.yaml"
    path.write_text(yaml.safe_dump({"tokens": entries}))
    path.chmod(0o600)
    settings = Settings(tasks_dir=tasks_dir, team_tokens=path)
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        yield client


def test_a_team_names_a_folder_under_its_root(teams: TestClient, code: Path) -> None:
    body = task_json(runtimeEnv={"working_dir": str(code / "proj")})
    assert teams.put("/tasks/team-a/train", json=body, headers=auth("team-a")).status_code == 201


def test_the_issue_reproduction_working_dir_etc_rayqueue(
    teams: TestClient, tasks_dir: Path, code: Path, secret: Path
) -> None:
    before = snapshot(tasks_dir)
    body = task_json(runtimeEnv={"working_dir": str(secret)})
    response = teams.put("/tasks/team-a/steal", json=body, headers=auth("team-a"))
    assert response.status_code == 403, response.text
    assert response.json()["detail"] == (
        f"spec.runtimeEnv.working_dir: {secret} is outside the allowed roots ({code})"
    )
    assert snapshot(tasks_dir) == before


@pytest.mark.parametrize(
    "env",
    [
        {"py_modules": ["{secret}"]},
        {"pip": "{secret}/admin-token"},
        {"uv": "{secret}/admin-token"},
        {"conda": "{secret}/env.yaml"},
        {"working_dir": "/"},
        {"working_dir": "{code}/proj/../../../etc/rayqueue"},
        {"working_dir": "file://{secret}"},
    ],
)
def test_every_way_to_read_the_scheduler_disk_is_refused(
    teams: TestClient, tasks_dir: Path, code: Path, secret: Path, env: dict[str, Any]
) -> None:
    text = yaml.safe_dump(env).replace("{secret}", str(secret)).replace("{code}", str(code))
    before = snapshot(tasks_dir)
    body = task_json(runtimeEnv=yaml.safe_load(text))
    response = teams.put("/tasks/team-a/steal", json=body, headers=auth("team-a"))
    assert response.status_code == 403, response.text
    assert response.json()["detail"].startswith("spec.runtimeEnv.")
    assert snapshot(tasks_dir) == before


def test_a_symlink_in_the_root_leading_out_is_refused(
    teams: TestClient, code: Path, secret: Path
) -> None:
    (code / "link").symlink_to(secret)
    body = task_json(runtimeEnv={"working_dir": str(code / "link")})
    response = teams.put("/tasks/team-a/x", json=body, headers=auth("team-a"))
    assert response.status_code == 403
    assert f"resolves to {secret}" in response.json()["detail"]


def test_another_teams_root_is_not_yours(teams: TestClient, code: Path) -> None:
    body = task_json(runtimeEnv={"working_dir": str(code / "proj")})
    response = teams.put("/tasks/team-b/x", json=body, headers=auth("team-b"))
    assert response.status_code == 403
    assert "no root allows local paths" in response.json()["detail"]
    remote = task_json(runtimeEnv={"working_dir": "https://example.com/code.zip"})
    assert teams.put("/tasks/team-b/x", json=remote, headers=auth("team-b")).status_code == 201


def test_yaml_put_and_patch_are_checked_too(
    teams: TestClient, tasks_dir: Path, secret: Path
) -> None:
    a = auth("team-a") | {"Content-Type": "application/yaml"}
    text = task_yaml(runtimeEnv={"working_dir": str(secret)})
    assert teams.put("/tasks/team-a/y", content=text, headers=a).status_code == 403
    assert teams.put("/tasks/team-a/y", json=task_json(), headers=auth("team-a")).status_code == 201
    before = snapshot(tasks_dir)
    patch = {"spec": {"runtimeEnv": {"py_modules": [str(secret)]}}}
    response = teams.patch("/tasks/team-a/y", json=patch, headers=auth("team-a"))
    assert response.status_code == 403
    assert response.json()["detail"].startswith("spec.runtimeEnv.py_modules[0]: ")
    assert snapshot(tasks_dir) == before


def test_a_malformed_path_is_422(teams: TestClient) -> None:
    body = task_json(runtimeEnv={"working_dir": 5})
    response = teams.put("/tasks/team-a/x", json=body, headers=auth("team-a"))
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "spec.runtimeEnv.working_dir"


def test_legacy_add_task_is_checked(teams: TestClient, tasks_dir: Path, code: Path) -> None:
    before = snapshot(tasks_dir)
    response = teams.post("/add_task", json=SEED_BODY, headers=auth("ops"))  # /home/ray/src/...
    assert response.status_code == 403
    assert "spec.runtimeEnv.working_dir: /home/ray/src/mlumina is outside" in response.text
    assert snapshot(tasks_dir) == before
    inside = SEED_BODY | {"runtime_env": {"working_dir": str(code / "proj")}}
    assert teams.post("/add_task", json=inside, headers=auth("ops")).status_code == 200


def test_single_tenant_keeps_the_old_behaviour(client: TestClient, secret: Path) -> None:
    """No team tokens and no --working-dir-root: any path, as before (serve warns)."""
    assert client.post("/add_task", json=SEED_BODY).status_code == 200
    body = task_json(runtimeEnv={"working_dir": str(secret)})
    assert client.put("/tasks/x", json=body).status_code == 201


def test_a_global_root_confines_the_single_tenant_too(
    tasks_dir: Path, code: Path, secret: Path
) -> None:
    settings = Settings(tasks_dir=tasks_dir, working_dir_roots=(str(code),))
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        inside = task_json(runtimeEnv={"working_dir": str(code / "proj")})
        assert client.put("/tasks/x", json=inside).status_code == 201
        outside = task_json(runtimeEnv={"working_dir": str(secret)})
        assert client.put("/tasks/y", json=outside).status_code == 403
