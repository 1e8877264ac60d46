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
