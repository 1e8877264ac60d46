"""GET /cluster, /healthz and /readyz: what the loop last saw, and whether it is alive."""

from __future__ import annotations

from fastapi.testclient import TestClient

from specs.cluster import Capacity
from tests.api.conftest import task_yaml

GIB = 2**30


def test_without_a_loop_cluster_is_unknown_and_not_ready(client: TestClient) -> None:
    body = client.get("/cluster").json()
    assert body["queueId"] == "q-test"
    for key in ("capacity", "used", "free", "queued", "running", "rayAvailable", "lastPassAt"):
        assert body[key] is None, key
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert "no reconcile loop" in ready.json()["detail"]
    assert client.get("/healthz").json() == {"status": "ok"}


def test_cluster_reports_the_last_pass(make_world) -> None:
    world, api = make_world(Capacity(4, 1, 16 * GIB))
    assert api.get("/cluster").json()["capacity"] is None  # no pass yet
    for name, cpu in (("a", 3), ("b", 2)):
        world.tasks.joinpath(f"{name}.yaml").write_text(task_yaml(cpu=cpu))
    world.step()
    body = api.get("/cluster").json()
    assert body["capacity"] == {"cpu": 4, "gpu": 1, "memory": 16 * GIB}
    assert body["used"] == {"cpu": 3, "gpu": 0, "memory": 0}
    assert body["free"] == {"cpu": 1, "gpu": 1, "memory": 16 * GIB}
    assert (body["queued"], body["starting"], body["running"]) == (1, 1, 0)
    assert body["rayAvailable"] is True
    assert body["lastPassAt"].endswith("Z")


def test_readiness_follows_the_loop_and_ray(make_world) -> None:
    world, api = make_world(interval_seconds=1.0, ray_timeout_seconds=2.0)
    not_yet = api.get("/readyz")
    assert not_yet.status_code == 503
    assert "not completed a pass" in not_yet.json()["detail"]

    world.step()
    ready = api.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["ready"] is True

    world.clock.now += 60  # the loop stalled
    stale = api.get("/readyz")
    assert stale.status_code == 503
    assert set(stale.json()["checks"]) == {"loop", "ray"}

    world.ray.available = False
    world.step()  # the loop runs again, but Ray does not answer
    down = api.get("/readyz")
    assert down.status_code == 503
    assert set(down.json()["checks"]) == {"ray"}
    assert api.get("/cluster").json()["rayAvailable"] is False

    world.ray.available = True
    world.clock.now += 60  # past the backoff
    world.step()
    assert api.get("/readyz").status_code == 200


def test_readiness_reports_a_missing_folder(make_world) -> None:
    world, api = make_world()
    world.step()
    world.tasks.rename(world.tasks.with_name("moved"))
    world.step()
    response = api.get("/readyz")
    assert response.status_code == 503
    assert "folder" in response.json()["checks"]
