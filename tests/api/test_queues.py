"""GET /queues, GET /queues/{name}, ?queue= on the task listing, and /add_task's queue."""

from __future__ import annotations

from fastapi.testclient import TestClient

from specs.cluster import Capacity
from tests.api.conftest import SEED_BODY, task_yaml

GIB = 2**30
CONFIG = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 2}
    - name: org/team-b
      nominalQuota: {cpu: 1}
      weight: 2
"""


def test_no_queues_configured_is_404(client: TestClient) -> None:
    response = client.get("/queues")
    assert response.status_code == 404
    assert "no queues are configured" in response.json()["detail"]
    assert client.get("/queues/team-a").status_code == 404


def test_queues_and_filtered_tasks_after_a_pass(make_world) -> None:
    world, api = make_world(Capacity(4, 0, 16 * GIB))
    (world.tasks / "_queues.yaml").write_text(CONFIG)
    assert "no status yet" in api.get("/queues").json()["detail"]
    for name, cpu in (("team-a/x", 1), ("team-a/y", 2), ("org/team-b/z", 1), ("loose", 1)):
        path = world.tasks / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(task_yaml(cpu=cpu))
    world.step()

    body = api.get("/queues").json()
    assert body["config"]["valid"] is True
    assert [q["name"] for q in body["items"]] == ["team-a", "org/team-b", "default"]
    team_b = api.get("/queues/org/team-b").json()
    assert team_b["weight"] == 2 and team_b["admitted"] == 1
    assert team_b["nominalQuota"]["cpu"] == 1
    default = api.get("/queues/default").json()
    assert default["nominalQuota"]["cpu"] == 1  # the 4 CPUs beyond team-a's 2 and team-b's 1
    assert api.get("/queues/nope").status_code == 404

    rows = api.get("/tasks", params={"queue": "team-a"}).json()["items"]
    assert [(r["name"], r["queue"]) for r in rows] == [
        ("team-a/x", "team-a"),
        ("team-a/y", "team-a"),
    ]
    everything = api.get("/tasks").json()["items"]
    assert {r["name"]: r["queue"] for r in everything}["loose"] == "default"


def test_add_task_lands_in_the_default_queue(make_world) -> None:
    world, api = make_world(Capacity(4, 0, 16 * GIB))
    (world.tasks / "_queues.yaml").write_text(CONFIG)
    response = api.post("/add_task", json=SEED_BODY)
    assert response.status_code == 200, response.text
    world.step()
    rows = api.get("/tasks", params={"queue": "default"}).json()["items"]
    assert len(rows) == 1 and rows[0]["name"].startswith("mlumina-my_job")


LIMITED = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      maxRunning: 1
      maxQueued: 2
"""


def test_a_full_queue_refuses_an_api_write_with_429_and_a_file_waits_as_queue_full(
    make_world,
) -> None:
    world, api = make_world(Capacity(8, 0, 16 * GIB))
    (world.tasks / "_queues.yaml").write_text(LIMITED)
    (world.tasks / "team-a").mkdir()
    for name in ("a0", "a1", "a2"):
        (world.tasks / f"team-a/{name}.yaml").write_text(task_yaml(cpu=1))
    world.step()
    world.step()
    # maxRunning 1: a0 runs; a1 and a2 wait for it (2 queued: the queue is full)
    assert world.status("team-a/a0")["phase"] in ("Starting", "Running")
    assert world.status("team-a/a1")["reason"] == "MaxRunning"
    assert world.status("team-a/a2")["reason"] == "MaxRunning"
    entry = api.get("/queues/team-a").json()
    assert (entry["pending"], entry["maxQueued"], entry["maxRunning"]) == (2, 2, 1)

    refused = api.put(
        "/tasks/team-a/a3", content=task_yaml(cpu=1), headers={"Content-Type": "application/yaml"}
    )
    assert refused.status_code == 429
    assert "queue team-a is full: 2 tasks queued, its maxQueued is 2" in refused.json()["detail"]
    assert not (world.tasks / "team-a/a3.yaml").exists()
    # elsewhere there is room
    other = api.put(
        "/tasks/loose", content=task_yaml(cpu=1), headers={"Content-Type": "application/yaml"}
    )
    assert other.status_code == 201

    # a file dropped in anyway waits as QueueFull and is not counted
    (world.tasks / "team-a/a4.yaml").write_text(task_yaml(cpu=1))
    world.step()
    late = world.status("team-a/a4")
    assert (late["phase"], late["reason"]) == ("Queued", "QueueFull")
    assert "team-a is full" in late["message"]
    assert late["queuePosition"] == 3  # after the two that count
    assert api.get("/queues/team-a").json()["pending"] == 2


def test_creates_between_two_passes_count_against_max_queued(make_world) -> None:
    # One task queued as of the last pass, maxQueued 2: of three creates before the next
    # pass, the first gets in and the other two are refused (the old check let all three in).
    world, api = make_world(Capacity(8, 0, 16 * GIB))
    (world.tasks / "_queues.yaml").write_text(LIMITED)
    (world.tasks / "team-a").mkdir()
    for name in ("a0", "a1"):
        (world.tasks / f"team-a/{name}.yaml").write_text(task_yaml(cpu=1))
    world.step()
    world.step()
    assert api.get("/queues/team-a").json()["pending"] == 1
    yaml_type = {"Content-Type": "application/yaml"}
    codes = [
        api.put(f"/tasks/team-a/n{i}", content=task_yaml(cpu=1), headers=yaml_type).status_code
        for i in range(3)
    ]
    assert codes == [201, 429, 429]
    # Replacing a task that exists adds none: allowed while the queue is full.
    again = api.put("/tasks/team-a/n0", content=task_yaml(cpu=2), headers=yaml_type)
    assert again.status_code == 200
    # Once the loop has counted it, the count is the loop's alone: still full.
    world.step()
    assert api.get("/queues/team-a").json()["pending"] == 2
    late = api.put("/tasks/team-a/n9", content=task_yaml(cpu=1), headers=yaml_type)
    assert late.status_code == 429
    assert "2 tasks queued" in late.json()["detail"]
