"""Submission ids through the API: spec.submissionId is a name (422 otherwise), and an explicit id
another task has or claims is refused (409) before anything is written."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from specs.cluster import RUNNING, RayJob
from tests.api.conftest import snapshot, task_json, task_yaml
from tests.api.test_security import auth, teams  # noqa: F401  (the fixture)

ATTACK = "rq-team-b.train-abc-1/stop?"


def test_the_url_attack_is_refused_as_json_yaml_and_patch(
    teams: TestClient,  # noqa: F811
    tasks_dir: Path,
) -> None:
    before = snapshot(tasks_dir)
    a = auth("team-a-ci")
    as_json = teams.put("/tasks/team-a/x", json=task_json(submissionId=ATTACK), headers=a)
    as_yaml = teams.put(
        "/tasks/team-a/x",
        content=task_yaml(submissionId=ATTACK).encode(),
        headers={**a, "Content-Type": "application/yaml"},
    )
    patched = teams.patch("/tasks/team-a/train", json={"spec": {"submissionId": ATTACK}}, headers=a)
    for response in (as_json, as_yaml, patched):
        assert response.status_code == 422, response.text
        assert "spec.submissionId" in response.text
        assert "only letters, digits" in response.text
    assert snapshot(tasks_dir) == before


def test_the_reserved_prefix_and_dots_are_refused(teams: TestClient) -> None:  # noqa: F811
    a = auth("team-a-ci")
    for sid, why in [("rq-train-1a2b3c4d-1", "must not start with 'rq-'"), ("..", "'..'")]:
        response = teams.put("/tasks/team-a/x", json=task_json(submissionId=sid), headers=a)
        assert response.status_code == 422
        assert why in response.text


def test_squatting_another_teams_id_is_409_without_its_name(
    teams: TestClient,  # noqa: F811
    tasks_dir: Path,
) -> None:
    b = auth("team-b-ci")
    made = teams.put("/tasks/team-b/train", json=task_json(submissionId="b-train"), headers=b)
    assert made.status_code == 200  # the fixture wrote team-b/train already: a replace
    before = snapshot(tasks_dir)
    a = auth("team-a-ci")
    attempts = [
        teams.put(
            "/tasks/team-a/squat", json=task_json(submissionId="b-train", priority=9), headers=a
        ),
        teams.patch("/tasks/team-a/train", json={"spec": {"submissionId": "b-train"}}, headers=a),
        # a later run of b-train would be b-train-2, and a claim of b-train-2 is the same trap
        teams.put("/tasks/team-a/squat", json=task_json(submissionId="b-train-2"), headers=a),
    ]
    for response in attempts:
        assert response.status_code == 409, response.text
        detail = response.json()["detail"]
        assert "already used by another task" in detail
        assert "team-b" not in detail
    assert snapshot(tasks_dir) == before
    # Whoever may write team-b's task learns which one it is.
    ops = teams.put(
        "/tasks/team-a/squat", json=task_json(submissionId="b-train"), headers=auth("ops")
    )
    assert ops.status_code == 409
    assert "already used by task team-b/train" in ops.json()["detail"]
    # The owner's own edits go on as before.
    again = teams.patch("/tasks/team-b/train", json={"spec": {"priority": 7}}, headers=b)
    assert again.status_code == 200


def test_an_id_a_sidecar_records_or_a_ray_job_holds_is_taken(make_world) -> None:
    world, api = make_world()
    assert api.put("/tasks/b", json=task_json(submissionId="b-old")).status_code == 201
    world.step()
    # b moves to a new id; its sidecar still records its run under b-old.
    patch = api.patch("/tasks/b", json={"spec": {"submissionId": "b-new"}})
    assert patch.status_code == 200
    claimed = api.put("/tasks/a", json=task_json(submissionId="b-old"))
    assert claimed.status_code == 409
    assert "already used by task b" in claimed.json()["detail"]
    # A Ray job outside this queue holds an id: refused too, once the loop has seen it.
    world.ray.add_job(RayJob("someone-elses", RUNNING, metadata={}))
    world.step()
    foreign = api.put("/tasks/a", json=task_json(submissionId="someone-elses"))
    assert foreign.status_code == 409
    assert "a Ray job that is not this queue's" in foreign.json()["detail"]
    assert api.put("/tasks/a", json=task_json(submissionId="a-own")).status_code == 201
