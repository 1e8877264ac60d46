"""`rayqueue serve` runs the loop and the API in one process: the API reads the loop's own
store (create_app(store=...)), so it serves what the loop last read and holds, and a listing
does not walk the folder. The API's own writes show at once all the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api.app import create_app
from specs.cluster import Capacity
from specs.folder.store import TaskStore
from specs.service.tasks import TaskService
from specs.task.status import TaskStatus
from tests.api.conftest import BASE_URL, TestClient, task_yaml
from tests.support.world import World


def _held_back(status: TaskStatus, position: int) -> TaskStatus:
    """`status` with another queue position: what a loop holds before writing it."""
    body = status.status.model_copy(update={"queue_position": position})
    return status.model_copy(update={"status": body})


@pytest.fixture
def world(tasks_dir: Path) -> World:
    return World.build(tasks_dir, tick=0.0, api=True)


@pytest.fixture
def api(world: World) -> Iterator[TestClient]:
    settings = world.reconciler.settings
    app = create_app(
        settings, reconciler=world.reconciler, ray=world.ray, store=world.reconciler.store
    )
    with TestClient(app, base_url=BASE_URL) as client:
        yield client


def test_positions_are_the_loops_own(world: World, api: TestClient) -> None:
    world.write("a")
    world.write("b")
    world.step()
    store = world.reconciler.store
    on_disk = store.read_statuses()["b"]
    store.defer_status("b", _held_back(on_disk, 42))  # newer than its sidecar, not yet written
    rows = {row["name"]: row for row in api.get("/tasks").json()["items"]}
    assert rows["b"]["position"] == 42
    assert api.get("/tasks/b").json()["status"]["queuePosition"] == 42
    assert on_disk.status.queue_position != 42


def test_a_listing_does_not_walk_the_folder(world: World, api: TestClient) -> None:
    world.write("a")
    world.step()
    world.write("late")  # by another process; the loop has not scanned since
    assert [row["name"] for row in api.get("/tasks").json()["items"]] == ["a"]
    world.step()
    names = [row["name"] for row in api.get("/tasks").json()["items"]]
    assert names == ["a", "late"]


def test_the_apis_own_writes_show_at_once(world: World, api: TestClient) -> None:
    world.write("a")
    world.step()
    created = api.put("/tasks/new", content=task_yaml(), headers={"content-type": "text/yaml"})
    assert created.status_code == 201
    assert [row["name"] for row in api.get("/tasks").json()["items"]] == ["a", "new"]
    assert api.delete("/tasks/a").status_code == 200
    assert [row["name"] for row in api.get("/tasks").json()["items"]] == ["new"]
    world.step()  # the loop catches up; the listing is its own again
    assert [row["name"] for row in api.get("/tasks").json()["items"]] == ["new"]


def test_own_writes_are_read_from_disk_only_until_the_loop_has_read_them(
    tasks_dir: Path,
) -> None:
    store = TaskStore(tasks_dir)
    service = TaskService(store, loop_store=True)
    store.scan()  # the loop's first pass
    service.create("x", task_yaml(priority=1).encode())
    assert service.entries()["x"].task.spec.priority == 1  # type: ignore[union-attr]
    store.scan()  # the loop reads it as the service wrote it
    assert service.entries()["x"].task.spec.priority == 1  # type: ignore[union-attr]
    (tasks_dir / "x.yaml").write_text(task_yaml(priority=5))  # another process, unscanned
    assert service.entries()["x"].task.spec.priority == 1  # type: ignore[union-attr]
    store.scan()
    assert service.entries()["x"].task.spec.priority == 5  # type: ignore[union-attr]


def test_before_the_loops_first_scan_the_folder_is_read(tasks_dir: Path) -> None:
    (tasks_dir / "early.yaml").write_text(task_yaml())
    store = TaskStore(tasks_dir)
    service = TaskService(store, loop_store=True)
    assert [v.name for v in service.views()] == ["early"]
    assert store.scanned() is None  # read with a store of the service's own, not the loop's


def test_beyond_the_exact_places_the_api_tells_the_loops_exact_place(tasks_dir: Path) -> None:
    # One CPU, one exact place: "a" runs, "b" is shown exactly, "c" and "d" only as a bucket
    # in their sidecars, and exactly through the API, from the loop's last pass.
    world = World.build(
        tasks_dir, Capacity(1, 0, 2**34), tick=0.0, api=True, exact_queue_positions=1
    )
    for name in "abcd":
        world.write(name)
    world.step(2)
    assert world.status("d")["queuePositionBucket"] == ">1"
    assert "queuePosition" not in world.status("d")
    app = create_app(
        world.reconciler.settings,
        reconciler=world.reconciler,
        ray=world.ray,
        store=world.reconciler.store,
    )
    with TestClient(app, base_url=BASE_URL) as client:
        rows = {row["name"]: row["position"] for row in client.get("/tasks").json()["items"]}
        assert (rows["b"], rows["c"], rows["d"]) == (1, 2, 3)
        status = client.get("/tasks/d").json()["status"]
        assert (status["queuePosition"], status["queuePositionBucket"]) == (3, ">1")
