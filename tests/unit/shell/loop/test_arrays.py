"""Task arrays through the loop, with the fake Ray and a real folder: elements run as tasks of
their own, maxParallel caps them as a group, and one sidecar holds them all."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from specs.cluster import FAILED, META_TASK, RUNNING, SUCCEEDED, Capacity
from specs.folder.store import TaskStore
from specs.task import arraystatus
from tests.support.world import World


def _array_spec(array: dict[str, Any], cpu: float = 1, priority: int = 0) -> str:
    doc = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {
            "entrypoint": "python train.py",
            "resources": {"cpu": cpu},
            "priority": priority,
            "array": array,
        },
    }
    return yaml.safe_dump(doc)


def _sidecar(world: World, name: str = "sweep") -> dict[str, Any]:
    data = (world.tasks / f"{name}{arraystatus.SUFFIX}").read_bytes()
    doc: dict[str, Any] = json.loads(data)
    return doc


def _by_element(world: World) -> dict[str, str]:
    return {job.metadata[META_TASK]: job.submission_id for job in world.our_jobs()}


def test_max_parallel_caps_starting_and_running_in_index_order(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(
        _array_spec({"matrix": {"LR": ["a", "b", "c"], "SEED": [1, 2, 3, 4]}, "maxParallel": 4})
    )
    world.step()
    started = _by_element(world)
    # 8 CPUs free, 12 elements; the cap lets only the first 4 (in index order) start.
    assert sorted(started) == [f"sweep[{i}]" for i in range(4)]
    doc = _sidecar(world)
    assert doc["size"] == 12 and doc["counts"] == {"Queued": 8, "Starting": 4}
    waiting = world.reconciler.store.read_statuses(cached=True)["sweep[4]"].status
    assert waiting.reason == "ArrayAtMaxParallel"
    assert waiting.message == "array sweep has 4 elements starting or running (maxParallel)"
    # each element is told its values, index and size
    env = next(r for r in world.ray.submitted if r.metadata[META_TASK] == "sweep[3]")
    assert (
        env.runtime_env["env_vars"].items()
        >= {  # type: ignore[index]
            "LR": "a",
            "SEED": "4",
            "RAYQUEUE_ARRAY_INDEX": "3",
            "RAYQUEUE_ARRAY_SIZE": "12",
        }.items()
    )
    # one ends: exactly one more starts, the next in index order
    world.ray.set_status(started["sweep[0]"], SUCCEEDED)
    for sid in (started["sweep[1]"], started["sweep[2]"], started["sweep[3]"]):
        world.ray.set_status(sid, RUNNING)
    world.step()
    now = _by_element(world)
    assert sorted(set(now) - set(started)) == ["sweep[4]"]
    assert len({sid for sid in now.values()}) == 5  # an id of its own per element
    assert _sidecar(world)["counts"] == {"Queued": 7, "Starting": 1, "Running": 3, "Succeeded": 1}


def test_no_max_parallel_lets_the_cluster_decide(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 10}))
    world.step()
    assert len(_by_element(world)) == 8  # the 8 CPUs


def test_failed_elements_are_listed_and_survive_a_restart(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 3}))
    world.step()
    jobs = _by_element(world)
    world.ray.set_logs(jobs["sweep[1]"], "Traceback\nboom\n")
    world.ray.set_status(jobs["sweep[1]"], FAILED, exit_code=3)
    world.ray.set_status(jobs["sweep[0]"], SUCCEEDED)
    world.step()
    doc = _sidecar(world)
    assert doc["counts"] == {"Starting": 1, "Succeeded": 1, "Failed": 1}
    assert [(f["index"], f["exitCode"]) for f in doc["failed"]] == [(1, 3)]
    assert "boom" in doc["failed"][0]["logTail"]
    assert not (world.tasks / "sweep[1].status.yaml").exists()  # one sidecar, not one each
    # a new process reads the elements back from the one sidecar
    statuses = TaskStore(world.tasks).read_statuses()
    assert statuses["sweep[1]"].status.phase == "Failed"
    assert statuses["sweep[1]"].status.exit_code == 3
    assert statuses["sweep[0]"].status.submission_id == jobs["sweep[0]"]
    again = World.build(world.tasks, Capacity(8, 0, 64 * 2**30), ray=world.ray, queue_id="q")
    before = world.ray.calls.get("submit", 0)
    again.step()
    assert world.ray.calls.get("submit", 0) == before  # nothing submitted twice
    assert again.reconciler.store.read_statuses()["sweep[1]"].status.phase == "Failed"


def test_an_unchanged_array_is_not_rewritten(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 20}, cpu=1))
    world.step(2)  # submitted, then seen pending in Ray
    path = world.tasks / f"sweep{arraystatus.SUFFIX}"
    stamp = path.stat().st_mtime_ns
    world.step(3)
    assert path.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("cap", [4, None])
def test_sidecar_of_ten_thousand_elements_is_under_a_megabyte(world: World, cap: int) -> None:
    array: dict[str, Any] = {"matrix": {"LR": list(range(100)), "SEED": list(range(100))}}
    if cap is not None:
        array["maxParallel"] = cap
    (world.tasks / "sweep.yaml").write_text(_array_spec(array, cpu=1))
    world.step(2)
    size = (world.tasks / f"sweep{arraystatus.SUFFIX}").stat().st_size
    assert size < 1_000_000
    started = cap or 8
    assert _sidecar(world)["counts"] == {"Queued": 10_000 - started, "Starting": started}


def test_deleting_the_file_stops_every_element_and_forgets_the_sidecar(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 3}))
    world.step()
    for sid in _by_element(world).values():
        world.ray.set_status(sid, RUNNING)
    world.step()
    (world.tasks / "sweep.yaml").unlink()
    world.step(3)
    assert all(j.terminal or j.submission_id in world.ray.stop_requested for j in world.our_jobs())
    assert (
        len(world.ray.stop_requested | {j.submission_id for j in world.our_jobs() if j.terminal})
        == 3
    )


def _run_all(world: World, status: str = SUCCEEDED) -> None:
    for sid in _by_element(world).values():
        world.ray.set_status(sid, status)
    world.step()


def test_growing_an_array_keeps_what_finished_and_shrinking_forgets(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"matrix": {"LR": ["a", "b"]}}))
    world.step()
    _run_all(world)
    first = dict(_by_element(world))
    # a value added: one more element; the finished ones are not run again
    (world.tasks / "sweep.yaml").write_text(_array_spec({"matrix": {"LR": ["a", "b", "c"]}}))
    world.step()
    assert set(_by_element(world)) == {"sweep[0]", "sweep[1]", "sweep[2]"}
    assert {k: v for k, v in _by_element(world).items() if k in first} == first
    assert _sidecar(world)["counts"] == {"Starting": 1, "Succeeded": 2}
    # a value removed: its element is stopped and forgotten
    (world.tasks / "sweep.yaml").write_text(_array_spec({"matrix": {"LR": ["a", "b"]}}))
    world.step(2)
    assert _by_element(world)["sweep[2]"] in world.ray.stop_requested | {
        j.submission_id for j in world.our_jobs() if j.terminal
    }
    assert _sidecar(world)["size"] == 2


def test_priority_and_max_parallel_apply_in_place(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 4, "maxParallel": 1}))
    world.step()
    assert list(_by_element(world)) == ["sweep[0]"]
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 4, "maxParallel": 3}, priority=5))
    world.step()
    assert sorted(_by_element(world)) == ["sweep[0]", "sweep[1]", "sweep[2]"]
    assert world.ray.calls["submit"] == 3  # sweep[0] kept its run


def test_an_entrypoint_change_reruns_every_element(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 2}))
    world.step()
    _run_all(world)
    text = _array_spec({"count": 2}).replace("python train.py", "python train2.py")
    (world.tasks / "sweep.yaml").write_text(text)
    world.step(2)
    assert world.ray.calls["submit"] == 4


def test_suspend_suspends_every_element(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 3}))
    world.step()
    doc = yaml.safe_load(_array_spec({"count": 3}))
    doc["spec"]["suspend"] = True
    (world.tasks / "sweep.yaml").write_text(yaml.safe_dump(doc))
    world.step(3)
    assert _sidecar(world)["counts"] == {"Suspended": 3}


def test_other_tasks_start_past_a_capped_array(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 5, "maxParallel": 1}, priority=9))
    (world.tasks / "later.yaml").write_text(
        _array_spec({"count": 1}).replace("  array:\n    count: 1\n", "")
    )
    world.step()
    assert sorted(_by_element(world)) == ["later", "sweep[0]"]


def test_a_larger_count_adds_elements_and_keeps_finished_ones(world: World) -> None:
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 2}))
    world.step()
    _run_all(world)
    (world.tasks / "sweep.yaml").write_text(_array_spec({"count": 3}))
    world.step()
    assert world.ray.calls["submit"] == 3
    assert _sidecar(world)["counts"] == {"Starting": 1, "Succeeded": 2}
