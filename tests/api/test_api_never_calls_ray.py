"""README, "HTTP API": `rayqueue serve` "never calls Ray to create, change or cancel anything:
it writes or edits spec files, and reads the sidecars". Every writing route is called against
a FakeRay with running jobs; none of them submits, stops or deletes a job, and the loop's next
pass does what the edited file says."""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi.testclient import TestClient

from specs.cluster import RUNNING, Capacity
from tests.api.conftest import SEED_BODY, task_json
from tests.support.world import World

MERGE = {"Content-Type": "application/merge-patch+json"}
QUEUES = "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n    - name: team-a\n"
ACTING = ("submit", "stop", "delete")


def _acting_calls(world: World) -> Counter[str]:
    return Counter({m: world.ray.calls[m] for m in ACTING})


def _run(world: World, *names: str) -> None:
    """Submit what is queued and let Ray run it."""
    world.step()
    for name in names:
        world.ray.set_status(world.status(name)["submissionId"], RUNNING)
    world.step()


def test_no_writing_route_calls_ray(make_world: Any) -> None:
    world: World
    api: TestClient
    world, api = make_world(Capacity(8, 0, 64 * 2**30))
    for name in ("a", "b", "c", "d"):
        assert api.put(f"/tasks/{name}", json=task_json()).status_code == 201
    legacy = api.post("/add_task", json=SEED_BODY).json()["task_id"]
    _run(world, "a", "b", "c", "d")
    assert {world.status(n)["phase"] for n in "abcd"} == {"Running"}
    jobs = dict(world.ray.jobs)
    before = _acting_calls(world)

    writes = [
        api.put("/tasks/a", json=task_json("echo changed")),  # a run-defining change
        api.patch("/tasks/b", json={"spec": {"suspend": True}}, headers=MERGE),
        api.patch("/tasks/c", json={"spec": {"priority": 7}}, headers=MERGE),
        api.delete("/tasks/d"),
        api.put("/tasks/e", json=task_json()),
        api.post("/change_task_priority", json={"task_id": legacy, "priority": 3}),
        api.post("/cancel_task", json={"task_id": legacy}),
        api.post("/add_task", json=SEED_BODY),
        api.put("/config/_queues.yaml", content=QUEUES.encode()),
    ]
    assert all(r.status_code < 300 for r in writes), [(r.status_code, r.text) for r in writes]
    assert _acting_calls(world) == before
    assert world.ray.jobs == jobs

    # The loop acts on the files: a, b and d's jobs are stopped by its next passes.
    world.step(3)
    stopped = {world.ray.jobs[sid].status for sid in _sids(jobs, "a", "b", "d")}
    assert stopped == {"STOPPED"}
    assert _acting_calls(world)["stop"] > before["stop"]


def _sids(jobs: dict[str, Any], *names: str) -> list[str]:
    return [sid for sid, job in jobs.items() if job.metadata.get("rayqueue.task") in names]
