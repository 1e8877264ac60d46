"""runtimeEnv confinement by what Ray will read, not by the string's shape: a `conda` value
naming another team's YAML file with a trailing `/` or `/.` is still that file to Ray (it
reads it on the scheduler and ships it in the job's runtime env), so a team token must be
refused it as it is refused the plain path."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from specs.settings.process import Settings
from specs.tenancy.runtimepaths import Confinement
from tests.api.conftest import snapshot, task_json
from tests.support.world import World
from tests.tenancy.conftest import auth

PLAIN = "tasks/team-b/secret.yaml"
DISGUISED = [f"{PLAIN}/", f"{PLAIN}/.", "tasks/team-b/secret.yml/", f"{PLAIN}//"]


def test_the_plain_path_is_refused(teams: tuple[World, TestClient], tasks_dir: Path) -> None:
    """The check the disguised forms below slip past."""
    _, api = teams
    before = snapshot(tasks_dir)
    body = task_json(runtimeEnv={"conda": PLAIN})
    response = api.put("/tasks/team-a/steal", json=body, headers=auth("team-a"))
    assert response.status_code == 403, response.text
    assert snapshot(tasks_dir) == before


@pytest.mark.parametrize("conda", DISGUISED)
def test_a_disguised_conda_file_is_refused_through_the_api(
    teams: tuple[World, TestClient], tasks_dir: Path, conda: str
) -> None:
    _, api = teams
    before = snapshot(tasks_dir)
    body = task_json(runtimeEnv={"conda": conda})
    response = api.put("/tasks/team-a/steal", json=body, headers=auth("team-a"))
    assert response.status_code == 403, response.text
    assert response.json()["detail"].startswith("spec.runtimeEnv.conda: ")
    assert snapshot(tasks_dir) == before


@pytest.mark.parametrize("conda", DISGUISED)
def test_a_disguised_conda_file_is_refused_by_the_check(tmp_path: Path, conda: str) -> None:
    """The check the store runs on a spec committed into the folder, as the API does."""
    code = tmp_path / "code"
    code.mkdir()
    tasks = tmp_path / "tasks"
    (tasks / "team-b").mkdir(parents=True)
    (tasks / "team-b" / "secret.yaml").write_text("dependencies: [secret]\n")
    confinement = Confinement.from_settings(Settings(tasks_dir=tasks), cwd=str(tmp_path))
    problems = confinement.check({"conda": conda}, [str(code)])
    assert [p.field for p in problems] == ["spec.runtimeEnv.conda"], problems


@pytest.mark.parametrize("conda", DISGUISED)
def test_ray_reads_the_disguised_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conda: str
) -> None:
    """Why the disguised forms matter: Ray's own parser (what the job client runs on the
    scheduler when it submits) takes each for the YAML file and reads it."""
    validation = pytest.importorskip("ray._private.runtime_env.validation")
    (tmp_path / "tasks" / "team-b").mkdir(parents=True)
    (tmp_path / "tasks" / "team-b" / "secret.yaml").write_text("dependencies: [s3cr3t]\n")
    (tmp_path / "tasks" / "team-b" / "secret.yml").write_text("dependencies: [s3cr3t]\n")
    monkeypatch.chdir(tmp_path)
    assert validation.parse_and_validate_conda(conda) == {"dependencies": ["s3cr3t"]}
