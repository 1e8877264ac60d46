"""Fault 3, stuck start, and fault 4, head-node protection.

A job PENDING past --start-timeout is stopped and marked Failed (StartTimeout). A stop is a
request: it is repeated every pass until Ray reports the job ended, including a stop that Ray
acknowledges but does not carry out (ray #58353). At most --max-inflight jobs are Starting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import PENDING, RUNNING, STOPPED, Capacity
from tests.support.world import GIB, World


class ForgetfulRay(FakeRay):
    """Acknowledges the first `ignore` stops without doing anything, like a stop sent to a
    PENDING job whose supervisor does not exist yet."""

    def __init__(self, ignore: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ignore = ignore
        self.stop_calls: list[str] = []

    def stop(self, submission_id: str) -> None:
        with self._lock:
            self.stop_calls.append(submission_id)
            if self.ignore > 0:
                self._enter("stop")
                self.ignore -= 1
                return
        super().stop(submission_id)


def test_pending_past_start_timeout_is_stopped_and_failed(
    make_world: Callable[..., World],
) -> None:
    world = make_world(start_timeout_seconds=600)
    world.write("stuck", "python train.py")
    world.step()
    sid = world.status("stuck")["submissionId"]
    world.step(seconds=598)
    status = world.status("stuck")
    assert status["phase"] == "Starting" and status["rayStatus"] == PENDING
    assert world.ray.calls["stop"] == 0
    world.step(seconds=3)
    status = world.status("stuck")
    assert status["phase"] == "Failed" and status["reason"] == "StartTimeout"
    assert "600" in status["message"]
    world.step()
    assert world.ray.jobs[sid].status == STOPPED
    assert world.status("stuck")["rayStatus"] == STOPPED
    assert len(world.ray.submitted) == 1  # a failed start is not retried behind the user's back


def test_stop_is_repeated_until_ray_reports_the_end(make_world: Callable[..., World]) -> None:
    ray = ForgetfulRay(ignore=3, capacity=Capacity(4, 0, 16 * GIB))
    world = make_world(ray=ray, start_timeout_seconds=60)
    world.write("stuck", "python train.py")
    world.step()
    sid = world.status("stuck")["submissionId"]
    world.step(seconds=61)
    assert world.status("stuck")["reason"] == "StartTimeout"
    # The stops were acknowledged but ignored, and the job went on to run anyway.
    ray.set_status(sid, RUNNING)
    sent = len(ray.stop_calls)
    world.step(passes=3)
    # One stop per run: while Ray still lists the job, no stop is sent again
    # before the resend wait; after it, once per wait, until Ray reports the end.
    assert len(ray.stop_calls) == sent
    resend = world.reconciler.resend_stop_seconds + 0.5
    for _ in range(3):  # three resends, one per wait, are what the ignored stops need
        world.step(seconds=resend)
    assert ray.stop_calls == [sid] * 4  # still running after the ignored ones
    assert ray.jobs[sid].status == STOPPED
    world.step(passes=3, seconds=resend)
    assert len(ray.stop_calls) == 4  # ended: no more asking
    status = world.status("stuck")
    assert status["phase"] == "Failed" and status["reason"] == "StartTimeout"
    assert status["rayStatus"] == STOPPED


def test_deleting_a_pending_task_stops_its_job(make_world: Callable[..., World]) -> None:
    ray = ForgetfulRay(ignore=1, capacity=Capacity(4, 0, 16 * GIB))
    world = make_world(ray=ray)
    world.write("pending", "python train.py")
    world.step()
    sid = world.status("pending")["submissionId"]
    assert ray.jobs[sid].status == PENDING
    (world.tasks / "pending.yaml").unlink()
    world.step(passes=3)
    assert ray.jobs[sid].status == PENDING and len(ray.stop_calls) == 1  # ignored; not resent yet
    world.step(passes=2, seconds=world.reconciler.resend_stop_seconds + 0.5)
    assert ray.jobs[sid].status == STOPPED and len(ray.stop_calls) == 2
    assert not (world.tasks / "pending.status.yaml").exists()


def test_max_inflight_caps_jobs_starting_at_once(make_world: Callable[..., World]) -> None:
    world = make_world(capacity=Capacity(16, 0, 64 * GIB), max_inflight=2)
    for i in range(5):
        world.write(f"t{i}", "python train.py", priority=9 - i)
    world.step()
    phases = {f"t{i}": world.status(f"t{i}") for i in range(5)}
    assert [n for n, s in phases.items() if s["phase"] == "Starting"] == ["t0", "t1"]
    for name in ("t2", "t3", "t4"):
        assert phases[name]["phase"] == "Queued"
    assert phases["t2"]["reason"] == "InflightLimit"
    assert "starting at once" in phases["t2"]["message"]
    world.step(passes=3)
    assert len(world.ray.submitted) == 2  # PENDING jobs keep holding their slots
    world.ray.set_status(world.status("t0")["submissionId"], RUNNING)
    world.step()
    assert len(world.ray.submitted) == 3 and world.status("t2")["phase"] == "Starting"
