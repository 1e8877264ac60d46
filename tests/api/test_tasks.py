"""The resource API: GET/PUT/PATCH/DELETE /tasks/{name}, the list, and logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from specs.cluster import RUNNING, RayUnavailable
from tests.api.conftest import snapshot, task_json, task_yaml

YAML = {"content-type": "application/yaml"}
MERGE = {"content-type": "application/merge-patch+json"}


def put_yaml(client: TestClient, name: str, text: str, **headers: str) -> Any:
    return client.put(f"/tasks/{name}", content=text.encode(), headers={**YAML, **headers})


# --- PUT --------------------------------------------------------------------------------------


SIGNED_ANONYMOUS = "metadata:\n  annotations:\n    rayqueue/written-by: anonymous\n"


def test_put_yaml_creates_the_file_byte_for_byte(client: TestClient, tasks_dir: Path) -> None:
    text = "# my training job\n" + task_yaml("python train.py", cpu=2, priority=5)
    response = put_yaml(client, "train", text)
    assert response.status_code == 201
    # Byte for byte, comments included, plus who wrote it (no token here: anonymous).
    written = text + SIGNED_ANONYMOUS
    assert (tasks_dir / "train.yaml").read_text() == written
    body = response.json()
    assert body["metadata"] == {
        "name": "train",
        "annotations": {"rayqueue/written-by": "anonymous"},
    }
    assert body["spec"]["priority"] == 5
    assert body["status"]["phase"] is None
    assert response.headers["etag"].strip('"') == _sha(written.encode())


def test_put_json_creates_and_replaces(client: TestClient, tasks_dir: Path) -> None:
    created = client.put("/tasks/team-a/train", json=task_json(priority=2))
    assert created.status_code == 201
    path = tasks_dir / "team-a" / "train.yaml"
    assert yaml.safe_load(path.read_text())["spec"]["priority"] == 2
    replaced = client.put("/tasks/team-a/train", json=task_json(priority=3))
    assert replaced.status_code == 200
    assert yaml.safe_load(path.read_text())["spec"]["priority"] == 3
    # What GET returns can be sent back: status is ignored.
    got = client.get("/tasks/team-a/train").json()
    got["spec"]["priority"] = 4
    again = client.put("/tasks/team-a/train", json=got)
    assert again.status_code == 200, again.text
    assert "status" not in yaml.safe_load(path.read_text())


def test_put_identical_content_does_not_rewrite(client: TestClient, tasks_dir: Path) -> None:
    text = task_yaml()
    put_yaml(client, "a", text)
    stat_before = (tasks_dir / "a.yaml").stat()
    response = put_yaml(client, "a", text)
    assert response.status_code == 200
    stat_after = (tasks_dir / "a.yaml").stat()
    assert (stat_after.st_ino, stat_after.st_mtime_ns) == (
        stat_before.st_ino,
        stat_before.st_mtime_ns,
    )


def test_put_keeps_an_existing_yml_extension(client: TestClient, tasks_dir: Path) -> None:
    (tasks_dir / "old.yml").write_text(task_yaml())
    assert put_yaml(client, "old", task_yaml(priority=4)).status_code == 200
    assert sorted(p.name for p in tasks_dir.iterdir()) == ["old.yml"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (task_json(priority=12), "spec.priority"),
        (task_json(priority=-1), "spec.priority"),
        (
            {**task_json(), "spec": {"entrypoint": "x", "priorty": 1, "resources": {"cpu": 1}}},
            "spec.priorty",
        ),
        ({**task_json(), "spec": {"resources": {"cpu": 1}}}, "spec.entrypoint"),
        (task_json(cpu=0), "spec.resources"),
        (task_json(cpu=-1), "spec.resources.cpu"),
        (
            {**task_json(), "spec": {"entrypoint": "x", "resources": {"memory": "lots"}}},
            "spec.resources.memory",
        ),
        ({**task_json(), "apiVersion": "v2"}, "apiVersion"),
        ({**task_json(), "kind": "Job"}, "kind"),
        ({**task_json(), "metadata": {"name": "other"}}, "metadata.name"),
        ({**task_json(), "metadata": {"labels": {"a": 1}}}, "metadata.labels.a"),
    ],
)
def test_put_invalid_json_is_422_naming_the_field(
    client: TestClient, tasks_dir: Path, body: dict[str, Any], field: str
) -> None:
    put_yaml(client, "keep", task_yaml())
    before = snapshot(tasks_dir)
    for name in ("new", "keep"):
        response = client.put(f"/tasks/{name}", json=body)
        assert response.status_code == 422, response.text
        fields = [e["field"] for e in response.json()["detail"]]
        assert field in fields, fields
    assert snapshot(tasks_dir) == before


@pytest.mark.parametrize(
    ("text", "field", "line"),
    [
        ("apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: [oops\n", None, 5),
        (
            "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: a\n  entrypoint: b\n"
            "  resources: {cpu: 1}\n",
            "spec.entrypoint",
            5,
        ),
        (
            "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: a\n  priority: 99\n"
            "  resources: {cpu: 1}\n",
            "spec.priority",
            5,
        ),
        ("- just\n- a list\n", None, 1),
        ("", None, None),
        ("a: &a [*a]\n", "a[0]", 1),
    ],
)
def test_put_invalid_yaml_is_422_with_line(
    client: TestClient, tasks_dir: Path, text: str, field: str | None, line: int | None
) -> None:
    response = put_yaml(client, "bad", text)
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["field"] == field
    assert error["line"] == line
    assert snapshot(tasks_dir) == {}


def test_put_yaml_billion_laughs_is_422(client: TestClient, tasks_dir: Path) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    response = put_yaml(client, "bomb", "\n".join(lines) + "\n")
    assert response.status_code == 422
    assert snapshot(tasks_dir) == {}


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b"{bad json", "application/json", 422),
        (b"[1, 2]", "application/json", 422),
        (b'{"a": 1, "a": 2}', "application/json", 422),
        (b'{"a": NaN}', "application/json", 422),
        (b"[" * 5000 + b"]" * 5000, "application/json", 422),
        (b"\xff\xfe\x00", "application/json", 422),
        (b"\xff\xfe\x00", "application/yaml", 422),
        (b"<task/>", "application/xml", 415),
        (b"x=1", "application/x-www-form-urlencoded", 415),
    ],
)
def test_put_unparsable_bodies(
    client: TestClient, tasks_dir: Path, content: bytes, content_type: str, status: int
) -> None:
    response = client.put("/tasks/x", content=content, headers={"content-type": content_type})
    assert response.status_code == status, response.text
    assert "detail" in response.json()
    assert snapshot(tasks_dir) == {}


def test_if_match_guards_against_lost_updates(client: TestClient, tasks_dir: Path) -> None:
    etag = put_yaml(client, "a", task_yaml()).headers["etag"]
    assert client.get("/tasks/a").headers["etag"] == etag
    # Someone else edits the file in between.
    (tasks_dir / "a.yaml").write_text(task_yaml(priority=7))
    before = snapshot(tasks_dir)
    stale = put_yaml(client, "a", task_yaml(priority=1), **{"If-Match": etag})
    assert stale.status_code == 409
    assert (
        client.patch(
            "/tasks/a", json={"spec": {"priority": 2}}, headers={"If-Match": etag}
        ).status_code
        == 409
    )
    assert client.delete("/tasks/a", headers={"If-Match": etag}).status_code == 409
    assert snapshot(tasks_dir) == before
    fresh = client.get("/tasks/a").headers["etag"]
    ok = put_yaml(client, "a", task_yaml(priority=1), **{"If-Match": fresh})
    assert ok.status_code == 200
    assert ok.headers["etag"] != fresh
    # Unquoted and weak forms are accepted too.
    current = ok.headers["etag"].strip('"')
    patched = client.patch(
        "/tasks/a", json={"spec": {"priority": 2}}, headers={"If-Match": f"W/{current}"}
    )
    assert patched.status_code == 200


def test_if_match_on_a_missing_task_is_409(client: TestClient, tasks_dir: Path) -> None:
    response = put_yaml(client, "ghost", task_yaml(), **{"If-Match": '"abc"'})
    assert response.status_code == 409
    assert put_yaml(client, "ghost", task_yaml(), **{"If-Match": "*"}).status_code == 409
    assert snapshot(tasks_dir) == {}


def test_if_none_match_star_only_creates(client: TestClient, tasks_dir: Path) -> None:
    assert put_yaml(client, "a", task_yaml(), **{"If-None-Match": "*"}).status_code == 201
    before = snapshot(tasks_dir)
    again = put_yaml(client, "a", task_yaml(priority=3), **{"If-None-Match": "*"})
    assert again.status_code == 409
    assert snapshot(tasks_dir) == before


# --- GET --------------------------------------------------------------------------------------


def test_get_unknown_is_404(client: TestClient) -> None:
    response = client.get("/tasks/nope")
    assert response.status_code == 404
    assert response.json() == {"detail": "no task nope"}


def test_get_invalid_file_shows_the_errors(client: TestClient, tasks_dir: Path) -> None:
    (tasks_dir / "broken.yaml").write_text("apiVersion: rayqueue/v1\nkind: Task\nspec: [\n")
    response = client.get("/tasks/broken")
    assert response.status_code == 200
    body = response.json()
    assert body["spec"] is None
    assert body["status"]["phase"] == "Invalid"
    assert "broken.yaml:" in body["status"]["specErrors"][0]


def test_get_shows_the_reconciler_status(make_world) -> None:
    world, api = make_world()
    put_yaml(api, "a", task_yaml(priority=2))
    world.step()
    status = api.get("/tasks/a").json()["status"]
    assert status["phase"] == "Starting"
    assert status["submissionId"].startswith("rq-a-")


# --- PATCH ------------------------------------------------------------------------------------


def test_patch_changes_only_what_it_names(client: TestClient, tasks_dir: Path) -> None:
    text = (
        "# header comment\n"
        "apiVersion: rayqueue/v1\n"
        "kind: Task\n"
        "spec:\n"
        "  entrypoint: python train.py  # the job\n"
        "  priority: 1   # low for now\n"
        "  resources:\n"
        "    cpu: 2\n"
        "    memory: 512Mi\n"
    )
    put_yaml(client, "a", text)
    text += SIGNED_ANONYMOUS
    response = client.patch("/tasks/a", json={"spec": {"priority": 6}}, headers=MERGE)
    assert response.status_code == 200
    assert response.json()["spec"]["priority"] == 6
    assert (tasks_dir / "a.yaml").read_text() == text.replace("priority: 1 ", "priority: 6 ")

    client.patch("/tasks/a", json={"spec": {"suspend": True}})
    assert "    memory: 512Mi\n  suspend: true\nmetadata:" in (tasks_dir / "a.yaml").read_text()
    client.patch("/tasks/a", json={"spec": {"suspend": None}})
    assert (tasks_dir / "a.yaml").read_text() == text.replace("priority: 1 ", "priority: 6 ")


def test_patch_labels_and_nested_values(client: TestClient, tasks_dir: Path) -> None:
    put_yaml(client, "a", task_yaml())
    client.patch("/tasks/a", json={"metadata": {"labels": {"team": "vision", "tier": "yes"}}})
    client.patch("/tasks/a", json={"spec": {"resources": {"gpu": 1}}})
    doc = yaml.safe_load((tasks_dir / "a.yaml").read_text())
    assert doc["metadata"]["labels"] == {"team": "vision", "tier": "yes"}
    assert doc["spec"]["resources"] == {"cpu": 1, "gpu": 1}


def test_patch_that_makes_the_spec_invalid_is_422(client: TestClient, tasks_dir: Path) -> None:
    put_yaml(client, "a", task_yaml())
    before = snapshot(tasks_dir)
    for patch, field in [
        ({"spec": {"priority": 10}}, "spec.priority"),
        ({"spec": {"entrypoint": None}}, "spec.entrypoint"),
        ({"spec": {"resources": {"cpu": 0}}}, "spec.resources"),
        ({"spec": {"colour": "red"}}, "spec.colour"),
        ({"metadata": {"name": "b"}}, "metadata.name"),
    ]:
        response = client.patch("/tasks/a", json=patch)
        assert response.status_code == 422, (patch, response.text)
        assert field in [e["field"] for e in response.json()["detail"]]
    assert snapshot(tasks_dir) == before


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b"[1]", "application/merge-patch+json", 422),
        (b"7", "application/json", 422),
        (b"{oops", "application/json", 422),
        (b"spec: {priority: 1}", "application/yaml", 415),
        (b"x", "text/html", 415),
    ],
)
def test_patch_bad_bodies(
    client: TestClient, tasks_dir: Path, content: bytes, content_type: str, status: int
) -> None:
    put_yaml(client, "a", task_yaml())
    before = snapshot(tasks_dir)
    response = client.patch("/tasks/a", content=content, headers={"content-type": content_type})
    assert response.status_code == status
    assert snapshot(tasks_dir) == before


def test_patch_missing_is_404_and_invalid_file_is_409(client: TestClient, tasks_dir: Path) -> None:
    assert client.patch("/tasks/nope", json={"spec": {"priority": 1}}).status_code == 404
    (tasks_dir / "broken.yaml").write_text("spec: [\n")
    before = snapshot(tasks_dir)
    assert client.patch("/tasks/broken", json={"spec": {"priority": 1}}).status_code == 409
    assert snapshot(tasks_dir) == before


def test_patch_ignores_status(client: TestClient, tasks_dir: Path) -> None:
    put_yaml(client, "a", task_yaml())
    response = client.patch("/tasks/a", json={"status": {"phase": "Succeeded"}})
    assert response.status_code == 200
    assert "status" not in yaml.safe_load((tasks_dir / "a.yaml").read_text())


# --- DELETE -----------------------------------------------------------------------------------


def test_delete_removes_the_spec(client: TestClient, tasks_dir: Path) -> None:
    put_yaml(client, "team/a", task_yaml())
    response = client.delete("/tasks/team/a")
    assert response.status_code == 200
    assert response.json()["deleted"] is True
    assert not (tasks_dir / "team" / "a.yaml").exists()
    assert client.delete("/tasks/team/a").status_code == 404
    assert client.get("/tasks/team/a").status_code == 404


def test_delete_stops_the_running_job(make_world) -> None:
    world, api = make_world()
    put_yaml(api, "a", task_yaml())
    world.step()
    sid = world.status("a")["submissionId"]
    world.ray.set_status(sid, RUNNING)
    world.step()
    api.delete("/tasks/a")
    world.step()
    assert world.ray.jobs[sid].status == "STOPPED"


# --- list -------------------------------------------------------------------------------------


def _names(response: Any) -> list[str]:
    assert response.status_code == 200, response.text
    return [row["name"] for row in response.json()["items"]]


def test_list_shows_phase_priority_position_resources_age(make_world) -> None:
    world, c = make_world()
    put_yaml(c, "big", task_yaml(cpu=4, priority=1))
    world.step()
    world.clock.now += 90
    c.put(
        "/tasks/team/small",
        json={**task_json(cpu=1, priority=9), "metadata": {"labels": {"team": "a", "size": "s"}}},
    )
    (world.tasks / "broken.yaml").write_text("nope: [\n")
    world.step()
    rows = {row["name"]: row for row in c.get("/tasks").json()["items"]}
    assert set(rows) == {"big", "team/small", "broken"}
    assert rows["big"]["phase"] == "Starting"
    assert rows["big"]["age"] == "1m"
    assert rows["big"]["ageSeconds"] == 90
    small = rows["team/small"]
    assert (small["phase"], small["priority"], small["position"]) == ("Queued", 9, 1)
    assert small["resources"] == {"cpu": 1.0, "gpu": 0.0, "memory": "0"}
    assert small["labels"] == {"team": "a", "size": "s"}
    assert rows["broken"]["phase"] == "Invalid"
    assert rows["broken"]["priority"] is None

    assert _names(c.get("/tasks", params={"phase": "queued"})) == ["team/small"]
    assert _names(c.get("/tasks", params={"phase": "Queued,Starting"})) == ["big", "team/small"]
    assert _names(c.get("/tasks", params={"labelSelector": "team=a"})) == ["team/small"]
    assert _names(c.get("/tasks", params={"labelSelector": "team=a,size=m"})) == []
    assert _names(c.get("/tasks", params={"labelSelector": "team==a,size!=m"})) == ["team/small"]
    assert _names(c.get("/tasks", params={"labelSelector": "!team"})) == ["big", "broken"]
    assert _names(c.get("/tasks", params={"labelSelector": "size"})) == ["team/small"]


@pytest.mark.parametrize(
    "params", [{"phase": "Sleeping"}, {"labelSelector": "a b=c"}, {"labelSelector": "=x"}]
)
def test_list_bad_filters_are_400(client: TestClient, params: dict[str, str]) -> None:
    response = client.get("/tasks", params=params)
    assert response.status_code == 400
    assert "detail" in response.json()


def test_list_with_missing_folder_is_503(client: TestClient, tasks_dir: Path) -> None:
    tasks_dir.rmdir()
    response = client.get("/tasks")
    assert response.status_code == 503
    # Nor is the folder re-created by a write.
    assert put_yaml(client, "a", task_yaml()).status_code == 503
    assert not tasks_dir.exists()


# --- logs -------------------------------------------------------------------------------------


def test_logs_of_a_run(make_world) -> None:
    world, api = make_world()
    put_yaml(api, "a", task_yaml())
    assert api.get("/tasks/a/logs").status_code == 404  # never ran
    world.step()
    sid = world.status("a")["submissionId"]
    world.ray.set_logs(sid, "line 1\nline 2\nline 3\n")
    response = api.get("/tasks/a/logs")
    assert response.status_code == 200
    assert response.text == "line 1\nline 2\nline 3\n"
    assert response.headers["content-type"].startswith("text/plain")
    assert api.get("/tasks/a/logs", params={"tail": 2}).text == "line 2\nline 3\n"


def test_logs_errors(make_world, client: TestClient) -> None:
    assert client.get("/tasks/nope/logs").status_code == 404
    world, api = make_world()
    put_yaml(api, "a", task_yaml())
    world.step()
    world.ray.fail_next("logs", RayUnavailable("dashboard down"))
    response = api.get("/tasks/a/logs")
    assert response.status_code == 503
    assert "dashboard down" in response.json()["detail"]
    world.ray.jobs.clear()  # a head restarted without its history
    assert api.get("/tasks/a/logs").status_code == 404


def test_logs_without_ray_is_503(client: TestClient, tasks_dir: Path) -> None:
    put_yaml(client, "a", task_yaml())
    status = {
        "apiVersion": "rayqueue/v1",
        "kind": "TaskStatus",
        "metadata": {"name": "a"},
        "status": {"phase": "Running", "submissionId": "rq-a-1"},
    }
    (tasks_dir / "a.status.yaml").write_text(yaml.safe_dump(status))
    assert client.get("/tasks/a/logs").status_code == 503


def test_a_task_named_logs_is_still_reachable(client: TestClient) -> None:
    put_yaml(client, "team/logs", task_yaml(priority=3))
    response = client.get("/tasks/team/logs")
    assert response.status_code == 200
    assert response.json()["spec"]["priority"] == 3


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_openapi_and_docs(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    spec = json.loads(client.get("/openapi.json").text)
    for path in (
        "/add_task",
        "/change_task_priority",
        "/cancel_task",
        "/tasks",
        "/tasks/{name}",
        "/tasks/{name}/logs",
        "/cluster",
        "/healthz",
        "/readyz",
    ):
        assert path in spec["paths"], path


def test_the_list_and_the_status_show_an_overusing_run(make_world) -> None:
    world, c = make_world()
    put_yaml(c, "a", task_yaml(cpu=1))
    world.step()
    path = world.tasks / "a.status.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["status"]["overSince"] = "2026-01-01T00:00:00Z"
    doc["status"]["conditions"] = [
        {
            "type": "Overusing",
            "reason": "Overusing",
            "message": "holds 8 CPU, declared 1; counted as held",
            "lastTransitionTime": "2026-01-01T00:00:30Z",
        }
    ]
    path.write_text(yaml.safe_dump(doc))
    [row] = c.get("/tasks").json()["items"]
    assert row["overusing"] == "holds 8 CPU, declared 1; counted as held"
    status = c.get("/tasks/a").json()["status"]
    assert status["overSince"] == "2026-01-01T00:00:00.000Z"
    assert [cond["type"] for cond in status["conditions"]] == ["Overusing"]
