"""The loop shell with the fake Ray adapter and a real folder: ordering and failure handling."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from specs.cluster import RUNNING, Capacity, RayRequestError, RayUnavailable
from tests.support.world import GIB, World

pytestmark = pytest.mark.world(capacity=Capacity(4, 0, 16 * GIB))


def spec(entrypoint: str = "echo hi", cpu: float = 1, **extra: object) -> str:
    doc = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": entrypoint, "resources": {"cpu": cpu}, **extra},
    }
    return yaml.safe_dump(doc)


def status(tasks: Path, name: str) -> dict[str, object]:
    return yaml.safe_load((tasks / f"{name}.status.yaml").read_text())["status"]


def test_submission_id_is_on_disk_before_submit(world: World, monkeypatch) -> None:
    rec, ray, tasks = world.reconciler, world.ray, world.tasks
    (tasks / "a.yaml").write_text(spec())
    seen_on_disk: list[object] = []
    real_submit = ray.submit

    def submit(request):
        seen_on_disk.append(status(tasks, "a").get("submissionId"))
        return real_submit(request)

    monkeypatch.setattr(ray, "submit", submit)
    rec.run_pass()
    assert seen_on_disk == [ray.submitted[0].submission_id]


def test_unwritable_status_means_no_submit(world: World, monkeypatch) -> None:
    rec, ray, tasks = world.reconciler, world.ray, world.tasks
    (tasks / "a.yaml").write_text(spec())

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(rec.store, "write_status", fail)
    rec.run_pass()
    assert ray.submitted == []


def test_refused_submission_fails_the_run_once(world: World) -> None:
    rec, ray, tasks = world.reconciler, world.ray, world.tasks
    (tasks / "a.yaml").write_text(spec())
    ray.fail_next("submit", RayRequestError("working_dir /nope does not exist"))
    rec.run_pass()
    st = status(tasks, "a")
    assert st["phase"] == "Failed" and st["reason"] == "SubmitFailed"
    assert "/nope" in str(st["message"])
    rec.run_pass()
    assert ray.calls["submit"] == 1  # a permanent error is not retried


def test_ray_down_backs_off_and_recovers(world: World) -> None:
    rec, ray, tasks, clock = world.reconciler, world.ray, world.tasks, world.clock
    (tasks / "a.yaml").write_text(spec())
    ray.available = False
    rec.run_pass()
    assert status(tasks, "a")["conditions"][0]["type"] == "ClusterUnavailable"
    calls = ray.calls["list_jobs"]
    rec.run_pass()  # within the backoff window: Ray is not asked again
    assert ray.calls["list_jobs"] == calls
    ray.available = True
    clock.now += 60
    rec.run_pass()
    assert len(ray.submitted) == 1 and "conditions" not in status(tasks, "a")


def test_missing_folder_stops_nothing(world: World) -> None:
    rec, ray, tasks, clock = world.reconciler, world.ray, world.tasks, world.clock
    (tasks / "a.yaml").write_text(spec())
    rec.run_pass()
    sid = ray.submitted[0].submission_id
    ray.set_status(sid, RUNNING)
    rec.run_pass()
    shutil.rmtree(tasks)
    for _ in range(3):
        clock.now += 1
        assert rec.run_pass() is None
    assert ray.calls["stop"] == 0 and ray.jobs[sid].status == RUNNING
    assert rec.state.folder_error is not None


def test_stop_failures_are_retried_next_pass(world: World) -> None:
    rec, ray, tasks, clock = world.reconciler, world.ray, world.tasks, world.clock
    (tasks / "a.yaml").write_text(spec())
    rec.run_pass()
    sid = ray.submitted[0].submission_id
    ray.set_status(sid, RUNNING)
    rec.run_pass()
    (tasks / "a.yaml").unlink()
    ray.fail_next("stop", RayUnavailable("timeout"))
    rec.run_pass()
    assert ray.jobs[sid].status == RUNNING
    clock.now += 1
    rec.run_pass()
    assert ray.jobs[sid].status == "STOPPED"
    rec.run_pass()
    assert not (tasks / "a.status.yaml").exists()


def test_resource_history_has_one_line_per_change_or_heartbeat(world: World) -> None:
    rec, tasks, clock = world.reconciler, world.tasks, world.clock
    (tasks / "a.yaml").write_text(spec())
    for _ in range(3):  # Starting, then unchanged twice: one line
        rec.run_pass()
    path = tasks / ".rayqueue" / "resource_history.jsonl"
    assert len(path.read_text().splitlines()) == 1
    clock.advance(61)  # nothing changed, but the heartbeat is due
    rec.run_pass()
    (tasks / "b.yaml").write_text(spec(cpu=2))  # a change: written at once
    rec.run_pass()
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert yaml.safe_load(lines[2])["used"]["cpu"] == 3
    first = yaml.safe_load(lines[0])
    assert first["capacity"]["cpu"] == 4 and first["used"]["cpu"] == 1


def _filled_for_preemption(tmp_path: Path) -> World:
    """Four priority-0 sleepers fill the 4-CPU fake cluster; a priority-9 task then arrives."""
    tasks = tmp_path / "ptasks"
    tasks.mkdir()
    w = World.build(tasks, Capacity(4, 0, 16 * 2**30), preemption="LowerPriority")
    for i in range(4):
        (tasks / f"low{i}.yaml").write_text(spec())
    w.step()
    for request in w.ray.submitted:
        w.ray.set_status(request.submission_id, RUNNING)
    w.step()
    (tasks / "urgent.yaml").write_text(spec(cpu=2, priority=9))
    return w


def test_preemption_is_on_disk_before_any_stop(tmp_path: Path, monkeypatch) -> None:
    w = _filled_for_preemption(tmp_path)
    seen: list[tuple[str, object, object]] = []
    real_stop = w.ray.stop

    def stop(submission_id: str) -> None:
        task = w.ray.jobs[submission_id].metadata["rayqueue.task"]
        st = status(w.tasks, task)
        seen.append((task, st["phase"], st.get("preemptedBy")))
        real_stop(submission_id)

    monkeypatch.setattr(w.ray, "stop", stop)
    w.step()
    assert seen == [("low0", "Queued", "urgent"), ("low1", "Queued", "urgent")]
    env = w.ray.submitted[0].runtime_env
    assert env == {"env_vars": {"RAYQUEUE_RUN": "1", "RAY_JOB_STOP_WAIT_TIME_S": "30"}}


def test_unwritable_victim_status_means_no_stop(tmp_path: Path, monkeypatch) -> None:
    w = _filled_for_preemption(tmp_path)
    real_write = w.reconciler.store.write_status

    def write(name: str, st: object, durable: bool = True) -> bool:
        if name == "low0":
            raise OSError("disk full")
        return real_write(name, st, durable=durable)  # type: ignore[arg-type]

    monkeypatch.setattr(w.reconciler.store, "write_status", write)
    w.step()
    stopped = {
        w.ray.jobs[s].metadata["rayqueue.task"] for s in w.ray.jobs if w.ray.jobs[s].terminal
    }
    assert stopped == {"low1"}  # low0's preemption is not on disk, so its job runs on
