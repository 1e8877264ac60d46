"""Fault 2, Ray unreachable: the loop keeps running, shows ClusterUnavailable, stops nothing and
touches no spec; calls time out and back off exponentially, and the backoff resets when Ray is
back. A cluster that comes back empty turns a vanished run into Lost after a grace period,
queued again once, never Succeeded or Failed."""

from __future__ import annotations

import http.server
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import RUNNING, STOPPED, RayUnavailable
from tests.support.net import free_port
from tests.support.specs import snapshot
from tests.support.world import World


def specs_of(folder: Path) -> dict[str, bytes]:
    """The spec files only: sidecars and our state folder are ours to write."""
    return {
        k: v
        for k, v in snapshot(folder).items()
        if k.endswith((".yaml", ".yml")) and not k.endswith(".status.yaml")
    }


def conditions(world: World, name: str) -> list[str]:
    return [c["type"] for c in world.status(name).get("conditions", [])]


def running_world(make_world: Callable[..., World], names: tuple[str, ...] = ("a", "b")) -> World:
    world = make_world()
    for name in names:
        world.write(name, "python train.py")
    world.step()
    for job in world.our_jobs():
        world.ray.set_status(job.submission_id, RUNNING)
    world.step()
    assert all(world.status(n)["phase"] == "Running" for n in names)
    return world


def test_dead_dashboard_stops_nothing_touches_no_spec_and_backs_off(
    make_world: Callable[..., World],
) -> None:
    world = running_world(make_world)
    fake = world.ray
    dead = RayJobsAdapter(f"http://127.0.0.1:{free_port()}", timeout_seconds=0.5)
    world.reconciler.ray = dead
    (world.tasks / "b.yaml").unlink()  # a deletion while Ray is down must wait for Ray
    world.write("c", "python new.py")  # and a new task must not be submitted blind
    before = specs_of(world.tasks)

    backoffs = []
    for _ in range(7):
        # Jump to the moment the loop will ask Ray again, so every pass is a real attempt.
        world.step(seconds=max(world.reconciler.state.ray_backoff_seconds, 1.0))
        backoffs.append(world.reconciler.state.ray_backoff_seconds)
        assert world.reconciler.state.ray_error is not None
    assert backoffs == [2, 4, 8, 16, 30, 30, 30]  # doubles from the interval, capped
    assert conditions(world, "a") == ["ClusterUnavailable"]
    assert world.status("a")["phase"] == "Running"
    assert "could not be asked" in world.status("a")["conditions"][0]["message"]
    assert specs_of(world.tasks) == before
    assert fake.calls["stop"] == 0 and fake.calls["submit"] == 2
    assert all(j.status == RUNNING for j in fake.jobs.values())

    world.reconciler.ray = fake  # the dashboard is back
    world.step(seconds=30)
    assert world.reconciler.state.ray_backoff_seconds == 0
    assert world.reconciler.state.ray_failures == 0
    assert conditions(world, "a") == []
    world.step()
    sid_b = next(j.submission_id for j in world.our_jobs() if j.metadata["rayqueue.task"] == "b")
    assert fake.jobs[sid_b].status == STOPPED  # the deletion is carried out now
    assert world.status("c")["phase"] in ("Starting", "Running")


def test_fake_ray_unavailable_keeps_everything_as_it_was(
    make_world: Callable[..., World],
) -> None:
    world = running_world(make_world)
    world.ray.available = False
    world.write("a", "python changed.py")  # even a run-defining change must wait
    before = specs_of(world.tasks)
    for _ in range(5):
        world.step(seconds=31)
        for name in ("a", "b"):
            status = world.status(name)
            assert status["phase"] == "Running", status
            assert conditions(world, name) == ["ClusterUnavailable"]
    assert specs_of(world.tasks) == before
    assert world.ray.calls["stop"] == 0 and world.ray.calls["submit"] == 2
    world.ray.available = True
    world.step(seconds=31)
    assert world.reconciler.state.ray_backoff_seconds == 0
    assert world.ray.calls["stop"] == 1  # now the change ends the old run
    assert world.status("a")["run"] == 2


def test_every_call_has_a_timeout_against_a_hung_dashboard() -> None:
    # A listener that never answers: connect succeeds, the request hangs forever.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        port = server.getsockname()[1]
        ray = RayJobsAdapter(f"http://127.0.0.1:{port}", timeout_seconds=0.5)
        for call in (ray.list_jobs, ray.capacity, lambda: ray.stop("x"), lambda: ray.logs("x")):
            started = time.monotonic()
            with pytest.raises(RayUnavailable):
                call()
            assert time.monotonic() - started < 5


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@pytest.fixture
def refusing_dashboard() -> Iterator[str]:
    """An HTTP server that answers 503 to everything, as a proxy before a dead dashboard."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_refusing_dashboard_is_unavailable_not_an_error(
    make_world: Callable[..., World], refusing_dashboard: str
) -> None:
    with pytest.raises(RayUnavailable):
        RayJobsAdapter(refusing_dashboard, timeout_seconds=2).list_jobs()
    world = running_world(make_world, ("a",))
    world.reconciler.ray = RayJobsAdapter(refusing_dashboard, timeout_seconds=2)
    world.step()
    assert conditions(world, "a") == ["ClusterUnavailable"]
    assert world.status("a")["phase"] == "Running"


@pytest.mark.ray
def test_real_ray_back_after_outage_resumes(
    make_world: Callable[..., World], ray_head: str
) -> None:
    """A real adapter: dead address first, then the real head; the queue proceeds."""
    world = make_world(queue_id=f"rel-outage-{time.time_ns()}")
    world.reconciler.ray = RayJobsAdapter(f"http://127.0.0.1:{free_port()}", timeout_seconds=0.5)
    world.write("a", "python -c 'print(1)'")
    world.step()
    assert world.status("a")["phase"] == "Queued"
    assert conditions(world, "a") == ["ClusterUnavailable"]
    real = RayJobsAdapter(ray_head, timeout_seconds=10)
    world.reconciler.ray = real
    world.step(seconds=30)
    assert world.reconciler.state.ray_backoff_seconds == 0
    status = world.status("a")
    assert status["phase"] == "Starting" and conditions(world, "a") == []
    sid = status["submissionId"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not real.job_info(sid).terminal:
        time.sleep(0.2)
    world.step()
    assert world.status("a")["phase"] == "Succeeded"


def test_cluster_came_back_empty_lost_after_grace_requeued_once(
    make_world: Callable[..., World], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "rayqueue.loop")
    world = make_world(lost_grace_seconds=60)
    world.write("train", "python train.py")
    world.step()
    first = world.status("train")["submissionId"]
    world.ray.set_status(first, RUNNING)
    world.step()

    phases: list[str] = []

    def step(seconds: float = 1.0) -> dict[str, object]:
        world.step(seconds=seconds)
        status = world.status("train")
        phases.append(str(status["phase"]))
        return status

    # The head goes down, and comes back without fault tolerance: every job forgotten.
    world.ray.available = False
    for _ in range(3):
        step(seconds=31)
    world.ray.clear()
    world.ray.available = True
    status = step(seconds=31)
    # Missing right after an outage has its own reason (such a loss is not counted
    # against a retry limit under `on: [Lost]`).
    assert status["phase"] == "Running" and status["reason"] == "JobMissingAfterOutage"
    status = step(seconds=30)  # still inside the grace period
    assert status["reason"] == "JobMissingAfterOutage"
    status = step(seconds=31)
    # Requeued, and (the cluster being empty) admitted again in the same pass.
    assert status["phase"] == "Starting" and status["run"] == 2
    assert status["retries"] == 1  # `retries` counts them; lostRestarts is read only
    assert "lost train: job " in caplog.text and "vanished; queued again" in caplog.text
    second = status["submissionId"]
    assert second != first
    world.ray.set_status(str(second), RUNNING)
    step()

    world.ray.clear()  # lost again: maxLostRestarts (default 1) is used up
    step()
    status = step(seconds=61)
    assert status["phase"] == "Lost" and status["reason"] == "JobLost"
    for _ in range(3):
        status = step(seconds=61)
    assert status["phase"] == "Lost" and status["run"] == 2  # not queued a third time
    assert "Succeeded" not in phases and "Failed" not in phases
    assert len(world.ray.submitted) == 2
