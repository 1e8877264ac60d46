"""The old scheduler's endpoints: /add_task, /change_task_priority, /cancel_task."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from specs.cluster import RUNNING, STOPPED, Capacity
from tests.api.conftest import SEED_BODY, snapshot

TASK_ID = re.compile(
    r"^mlumina-(?P<name>.+)-priority-(?P<priority>\d)-(?P<cpu>\d+)cpu-(?P<gpu>\d+)gpu-"
    r"(?P<memory>\d+)memory-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
)


def spec_files(tasks: Path) -> list[Path]:
    return sorted(p for p in tasks.rglob("*.yaml") if not p.name.endswith(".status.yaml"))


def add(client: TestClient, **overrides: Any) -> dict[str, Any]:
    response = client.post("/add_task", json={**SEED_BODY, **overrides})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --- /add_task ------------------------------------------------------------------------------


def test_seed_example_body_is_accepted_and_written_as_a_spec(
    client: TestClient, tasks_dir: Path
) -> None:
    response = client.post("/add_task", json=SEED_BODY)
    assert response.status_code == 200
    task_id = response.json()["task_id"]
    match = TASK_ID.match(task_id)
    assert match is not None, task_id
    assert match.group("name", "priority", "cpu", "gpu", "memory") == ("my_job", "1", "2", "0", "4")

    [path] = spec_files(tasks_dir)
    assert path.name == f"{task_id}.yaml"  # a valid name: the file is named by the id
    doc = yaml.safe_load(path.read_text())
    assert doc["metadata"]["labels"] == {"rayqueue/api": "legacy"}
    assert doc["metadata"]["annotations"] == {
        "rayqueue/legacyName": "my_job",
        "rayqueue/written-by": "anonymous",  # no token configured
    }
    assert doc["spec"] == {
        "entrypoint": "python examples/scheduler/test.py",
        "runtimeEnv": {"working_dir": "/home/ray/src/mlumina"},
        "priority": 1,
        "resources": {"cpu": 2, "gpu": 0, "memory": "4Gi"},
        "timeoutSeconds": 300,
        "submissionId": task_id,
    }
    # The resource API finds it under the returned name.
    got = client.get(f"/tasks/{response.json()['task']}")
    assert got.status_code == 200
    assert got.json()["spec"]["submissionId"] == task_id


def test_each_add_gets_a_new_id_and_file(client: TestClient, tasks_dir: Path) -> None:
    first, second = add(client), add(client)
    assert first["task_id"] != second["task_id"]
    assert len(spec_files(tasks_dir)) == 2


def test_first_run_uses_task_id_as_submission_id(make_world) -> None:
    world, api = make_world()
    task_id = add(api)["task_id"]
    world.step()
    assert [r.submission_id for r in world.ray.submitted] == [task_id]
    assert world.ray.jobs[task_id].status == "PENDING"
    state = api.post("/cancel_task", json={"task_id": task_id}).json()
    assert state["submission_id"] == task_id


def test_name_that_is_not_a_file_name_is_sanitized_and_still_found(
    client: TestClient, tasks_dir: Path
) -> None:
    body = add(client, name="my job: ü")
    task_id = body["task_id"]
    assert task_id.startswith("mlumina-my job: ü-priority-1-")
    [path] = spec_files(tasks_dir)
    assert path.stem == body["task"]
    assert re.fullmatch(r"[A-Za-z0-9._-]+", path.stem)
    # The id is no valid submission id (a space, ':', 'ü'): the spec runs under a cleaned one
    # and keeps the old id for the old endpoints, which answer with it word for word.
    doc = yaml.safe_load(path.read_text())
    assert doc["spec"]["submissionId"] == task_id.replace(" job: ü", "-job-")
    assert doc["metadata"]["annotations"]["rayqueue/legacyTaskId"] == task_id
    changed = client.post("/change_task_priority", json={"task_id": task_id, "priority": 8})
    assert changed.status_code == 200
    assert changed.json()["priority"] == 8
    assert changed.json()["task_id"] == task_id
    assert client.post("/cancel_task", json={"task_id": task_id}).json()["suspend"] is True


def test_an_id_outside_the_rule_runs_under_its_cleaned_form(make_world) -> None:
    world, api = make_world()
    task_id = api.post("/add_task", json={**SEED_BODY, "name": "a b%2F"}).json()["task_id"]
    assert task_id.startswith("mlumina-a b%2F-priority-")
    world.step()
    [request] = world.ray.submitted
    assert request.submission_id == "mlumina-a-b-2F-" + task_id.split("%2F-", 1)[1]
    state = api.post("/cancel_task", json={"task_id": task_id}).json()
    assert (state["task_id"], state["submission_id"]) == (task_id, request.submission_id)


def test_no_resources_is_rejected_with_the_old_message(client: TestClient, tasks_dir: Path) -> None:
    response = client.post("/add_task", json={**SEED_BODY, "cpu": 0, "gpu": 0, "memory": 0})
    assert response.status_code == 400
    assert response.json() == {"detail": "task must request at least one resource"}
    assert snapshot(tasks_dir) == {}


@pytest.mark.parametrize(
    ("field", "value", "resource", "capacity"),
    [("cpu", 5, "cpu", "4 cpu"), ("gpu", 1, "gpu", "0 gpu"), ("memory", 17, "memory", "16Gi")],
)
def test_more_than_the_cluster_has_is_rejected(
    make_world, tasks_dir: Path, field: str, value: int, resource: str, capacity: str
) -> None:
    world, api = make_world(Capacity(4, 0, 16 * 2**30))
    world.step()  # the loop has seen the capacity
    before = snapshot(tasks_dir)
    response = api.post("/add_task", json={**SEED_BODY, field: value})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert resource in detail and capacity in detail, detail
    assert snapshot(tasks_dir) == before


def test_capacity_not_seen_yet_accepts_and_loop_marks_unschedulable(make_world) -> None:
    world, api = make_world(Capacity(4, 0, 16 * 2**30))
    body = add(api, cpu=64)  # no pass yet: nothing known, so accepted
    world.step()
    assert world.status(body["task"])["phase"] == "Unschedulable"


def test_without_reconciler_capacity_is_unknown_so_big_tasks_are_accepted(
    client: TestClient,
) -> None:
    add(client, cpu=1000)


@pytest.mark.parametrize(
    "overrides",
    [
        {"priority": 10},
        {"priority": -1},
        {"cpu": -1},
        {"gpu": -1},
        {"memory": -4},
        {"timeout": -300},
        {"priority": "high"},
        {"cpu": 1.5},
        {"cpu": 10**12},
        {"name": ""},
        {"name": "a/b"},
        {"name": "a?b"},
        {"name": "a#b"},
        {"name": "tab\there"},
        {"name": "x" * 150},
        {"entrypoint": ""},
        {"entrypoint": "   "},
        {"runtime_env": "not a dict"},
    ],
)
def test_bad_bodies_are_422_and_write_nothing(
    client: TestClient, tasks_dir: Path, overrides: dict[str, Any]
) -> None:
    response = client.post("/add_task", json={**SEED_BODY, **overrides})
    assert response.status_code == 422, response.text
    assert isinstance(response.json()["detail"], list)
    assert snapshot(tasks_dir) == {}


@pytest.mark.parametrize("missing", ["name", "entrypoint"])
def test_required_fields(client: TestClient, tasks_dir: Path, missing: str) -> None:
    body = {k: v for k, v in SEED_BODY.items() if k != missing}
    response = client.post("/add_task", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", missing]
    assert snapshot(tasks_dir) == {}


@pytest.mark.parametrize(
    ("content", "headers"),
    [
        (b"{not json", {"content-type": "application/json"}),
        (b"[1, 2]", {"content-type": "application/json"}),
        (b"", {"content-type": "application/json"}),
        (b"\xff\xfe", {"content-type": "application/json"}),
    ],
)
def test_unparsable_bodies_are_422(
    client: TestClient, tasks_dir: Path, content: bytes, headers: dict[str, str]
) -> None:
    response = client.post("/add_task", content=content, headers=headers)
    assert response.status_code == 422
    assert "detail" in response.json()
    assert snapshot(tasks_dir) == {}


def test_unknown_fields_are_ignored_as_the_old_service_did(client: TestClient) -> None:
    add(client, user="alice")


# --- /change_task_priority -------------------------------------------------------------------


def test_change_priority_by_json_body_edits_only_priority(
    client: TestClient, tasks_dir: Path
) -> None:
    body = add(client)
    [path] = spec_files(tasks_dir)
    # A hand-edited file: comments and layout must survive the edit.
    original = path.read_text().replace(
        "  priority: 1\n", "  # bump me when the deadline is close\n  priority: 1   # default\n"
    )
    path.write_text(original)
    response = client.post(
        "/change_task_priority", json={"task_id": body["task_id"], "priority": 9}
    )
    assert response.status_code == 200
    state = response.json()
    assert state["task_id"] == body["task_id"]
    assert state["task"] == body["task"]
    assert state["priority"] == 9
    assert state["suspend"] is False
    assert path.read_text() == original.replace(
        "priority: 1   # default", "priority: 9   # default"
    )


def test_change_priority_by_query_params(client: TestClient, tasks_dir: Path) -> None:
    task_id = add(client)["task_id"]
    response = client.post("/change_task_priority", params={"task_id": task_id, "priority": "4"})
    assert response.status_code == 200
    assert response.json()["priority"] == 4
    [path] = spec_files(tasks_dir)
    assert yaml.safe_load(path.read_text())["spec"]["priority"] == 4


def test_change_priority_by_form_body(client: TestClient) -> None:
    task_id = add(client)["task_id"]
    response = client.post("/change_task_priority", data={"task_id": task_id, "priority": "6"})
    assert response.status_code == 200
    assert response.json()["priority"] == 6


def test_change_priority_body_wins_over_query(client: TestClient) -> None:
    task_id = add(client)["task_id"]
    response = client.post(
        "/change_task_priority",
        params={"task_id": task_id, "priority": 2},
        json={"priority": 7},
    )
    assert response.json()["priority"] == 7


def test_change_priority_of_a_resource_api_task_by_name(client: TestClient) -> None:
    put = client.put(
        "/tasks/team/train",
        json={
            "apiVersion": "rayqueue/v1",
            "kind": "Task",
            "spec": {"entrypoint": "echo", "resources": {"cpu": 1}},
        },
    )
    assert put.status_code == 201
    response = client.post("/change_task_priority", json={"task_id": "team/train", "priority": 3})
    assert response.status_code == 200
    assert response.json()["priority"] == 3


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"task_id": "mlumina-nope-priority-1-1cpu-0gpu-0memory-x", "priority": 3}, 404),
        ({"task_id": "../../etc/passwd", "priority": 3}, 404),
        ({"task_id": "", "priority": 3}, 422),
        ({"priority": 3}, 422),
        ({"task_id": None, "priority": 3}, 422),
        ({"task_id": 12, "priority": 3}, 422),
        ({"task_id": "TASK", "priority": 10}, 422),
        ({"task_id": "TASK", "priority": -1}, 422),
        ({"task_id": "TASK"}, 422),
        ({"task_id": "TASK", "priority": "urgent"}, 422),
    ],
)
def test_change_priority_bad_input(
    client: TestClient, tasks_dir: Path, payload: dict[str, Any], status: int
) -> None:
    task_id = add(client)["task_id"]
    payload = {k: (task_id if v == "TASK" else v) for k, v in payload.items()}
    before = snapshot(tasks_dir)
    response = client.post("/change_task_priority", json=payload)
    assert response.status_code == status, response.text
    assert "detail" in response.json()
    assert snapshot(tasks_dir) == before


def test_change_priority_bad_query_is_422(client: TestClient, tasks_dir: Path) -> None:
    task_id = add(client)["task_id"]
    before = snapshot(tasks_dir)
    response = client.post("/change_task_priority", params={"task_id": task_id, "priority": 11})
    assert response.status_code == 422
    assert snapshot(tasks_dir) == before


def test_change_priority_with_unsupported_body_type_is_415(client: TestClient) -> None:
    task_id = add(client)["task_id"]
    response = client.post(
        "/change_task_priority",
        content=f"task_id: {task_id}".encode(),
        headers={"content-type": "application/yaml"},
    )
    assert response.status_code == 415


def test_change_priority_of_an_invalid_file_is_refused(client: TestClient, tasks_dir: Path) -> None:
    body = add(client)
    [path] = spec_files(tasks_dir)
    path.write_text(path.read_text().replace("entrypoint:", "entrypont:"))
    before = snapshot(tasks_dir)
    response = client.post("/change_task_priority", json={"task_id": body["task"], "priority": 5})
    assert response.status_code == 409
    assert "entrypont" in response.json()["detail"]
    assert snapshot(tasks_dir) == before


# --- /cancel_task ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["json", "query", "form"])
def test_cancel_sets_suspend(client: TestClient, tasks_dir: Path, how: str) -> None:
    task_id = add(client)["task_id"]
    args: dict[str, Any] = {
        "json": {"json": {"task_id": task_id}},
        "query": {"params": {"task_id": task_id}},
        "form": {"data": {"task_id": task_id}},
    }[how]
    response = client.post("/cancel_task", **args)
    assert response.status_code == 200
    assert response.json()["suspend"] is True
    [path] = spec_files(tasks_dir)
    spec = yaml.safe_load(path.read_text())["spec"]
    assert spec["suspend"] is True
    assert spec["priority"] == 1
    # Cancelling twice is harmless and writes nothing.
    before = snapshot(tasks_dir)
    assert client.post("/cancel_task", json={"task_id": task_id}).status_code == 200
    assert snapshot(tasks_dir) == before


def test_cancel_unknown_is_404_and_missing_id_is_422(client: TestClient, tasks_dir: Path) -> None:
    add(client)
    before = snapshot(tasks_dir)
    assert client.post("/cancel_task", json={"task_id": "nope"}).status_code == 404
    assert client.post("/cancel_task").status_code == 422
    assert client.post("/cancel_task", json={}).status_code == 422
    assert snapshot(tasks_dir) == before


def test_cancel_keeps_a_queued_task_from_running(make_world) -> None:
    world, api = make_world(Capacity(2, 0, 16 * 2**30))
    first = add(api, cpu=2)
    world.step()
    second = add(api, cpu=2)
    world.step()
    assert world.status(second["task"])["phase"] == "Queued"
    state = api.post("/cancel_task", json={"task_id": second["task_id"]}).json()
    assert state["phase"] == "Queued"  # the loop has not acted yet; the answer says so
    world.step()
    assert world.status(second["task"])["phase"] == "Suspended"
    world.ray.set_status(first["task_id"], "SUCCEEDED")
    world.step(2)
    assert [r.submission_id for r in world.ray.submitted] == [first["task_id"]]


def test_cancel_stops_a_running_task(make_world) -> None:
    world, api = make_world()
    task_id = add(api)["task_id"]
    world.step()
    world.ray.set_status(task_id, RUNNING)
    world.step()
    response = api.post("/cancel_task", params={"task_id": task_id})
    assert response.json()["phase"] == "Running"
    world.step()
    assert world.ray.jobs[task_id].status == STOPPED
    state = api.post("/cancel_task", json={"task_id": task_id}).json()
    assert state["phase"] == "Suspended"


def test_change_priority_reorders_the_queue(make_world) -> None:
    world, api = make_world(Capacity(2, 0, 16 * 2**30))
    filler = add(api, cpu=2)
    world.step()
    low = add(api, cpu=2, name="low")
    world.clock.now += 1
    world.step()
    later = add(api, cpu=2, name="later")
    world.clock.now += 1
    world.step()
    assert world.status(low["task"])["queuePosition"] == 1
    assert world.status(later["task"])["queuePosition"] == 2
    api.post("/change_task_priority", json={"task_id": later["task_id"], "priority": 5})
    world.step()
    assert world.status(later["task"])["queuePosition"] == 1
    world.ray.set_status(filler["task_id"], "SUCCEEDED")
    world.step()
    assert [r.submission_id for r in world.ray.submitted][-1] == later["task_id"]


def test_a_cleaned_up_lookalike_is_not_matched(client: TestClient, tasks_dir: Path) -> None:
    # "../../etc/passwd" is not a name; its cleaned-up form "etc-passwd" names a task that
    # was not created under that id, so the id matches nothing.
    client.put(
        "/tasks/etc-passwd",
        json={
            "apiVersion": "rayqueue/v1",
            "kind": "Task",
            "spec": {"entrypoint": "echo", "resources": {"cpu": 1}},
        },
    )
    before = snapshot(tasks_dir)
    response = client.post("/cancel_task", json={"task_id": "../../etc/passwd"})
    assert response.status_code == 404
    assert snapshot(tasks_dir) == before
