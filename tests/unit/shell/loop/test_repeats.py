"""One stop per run, one log line per condition, and a log of what was done: the
loop with the fake Ray adapter and a real folder, counting log records."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from reconciler.app import daemon
from reconciler.shell.loop import writes
from reconciler.shell.loop.runner import Reconciler
from specs.cluster import RUNNING, Capacity, RayUnavailable
from specs.settings.process import Settings
from specs.task.status import TaskStatus
from specs.tenancy.policy import STOP_WAIT_ENV
from tests.support.world import GIB, World

pytestmark = pytest.mark.world(capacity=Capacity(4, 0, 16 * GIB))


def lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def running(w: World, name: str) -> str:
    w.write(name)
    w.step()
    sid = w.ray.submitted[-1].submission_id
    w.ray.set_status(sid, RUNNING)
    w.step()
    return sid


def test_a_stop_is_sent_once_per_run_then_again_only_after_the_stop_wait(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sid = running(world, "a")
    stops: list[str] = []
    # Ray takes its time: the job stays RUNNING while it is being stopped.
    monkeypatch.setattr(world.ray, "stop", stops.append)
    (world.tasks / "a.yaml").unlink()
    caplog.set_level(logging.INFO, "rayqueue.loop")
    world.step(15, seconds=0.2)
    assert stops == [sid]
    assert len(lines(caplog, "stop requested")) == 1
    world.step(seconds=world.reconciler.resend_stop_seconds)
    assert stops == [sid, sid]
    assert len(lines(caplog, "sent again")) == 1
    world.step(3)
    assert stops == [sid, sid]


def test_a_stop_is_resent_after_the_jobs_own_stop_wait_not_a_global_one(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The job was submitted with a 300 s stop wait: Ray may list it for 300 s after the stop
    # without the stop being lost, so nothing is resent within it, even past the global wait.
    world.write("a", runtimeEnv={"env_vars": {STOP_WAIT_ENV: "300"}})
    world.step()
    sid = world.ray.submitted[-1].submission_id
    world.ray.set_status(sid, RUNNING)
    world.step()
    stops: list[str] = []
    monkeypatch.setattr(world.ray, "stop", stops.append)
    (world.tasks / "a.yaml").unlink()
    world.step()
    assert stops == [sid]
    assert world.reconciler.resend_stop_seconds < 200
    world.step(seconds=world.reconciler.resend_stop_seconds + 1)
    world.step(seconds=100)
    assert stops == [sid]
    world.step(seconds=200)  # 300 s + the margin have passed
    assert stops == [sid, sid]


def test_a_stop_that_failed_is_sent_next_pass(world: World) -> None:
    sid = running(world, "a")
    (world.tasks / "a.yaml").unlink()
    world.ray.fail_next("stop", RayUnavailable("timeout"))
    world.step()
    assert world.ray.jobs[sid].status == RUNNING
    world.step()
    assert world.ray.jobs[sid].status == "STOPPED"


def test_a_full_disk_is_logged_when_it_starts_summarised_and_when_it_clears(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in "abcd":
        world.write(name, priority=1)
    real_write = world.reconciler.store.write_status

    def full(*args: object, **kwargs: object) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(world.reconciler.store, "write_status", full)
    caplog.set_level(logging.INFO, "rayqueue.loop")
    world.step(20)  # 4 tasks, 20 passes: 80 failed writes
    assert world.ray.submitted == []
    assert len(lines(caplog, "cannot write status")) == 1
    world.step(seconds=61)
    summaries = lines(caplog, "still failing")
    assert len(summaries) == 1 and "No space left" in summaries[0]
    monkeypatch.setattr(world.reconciler.store, "write_status", real_write)
    world.step(3)
    cleared = lines(caplog, "working again")
    assert len(cleared) == 1 and "cannot write status" in cleared[0]
    assert len(world.ray.submitted) == 4
    assert len(lines(caplog, "cannot write status")) == 3  # start, one summary, the end


def test_ray_unreachable_is_logged_when_it_starts_and_when_it_clears(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.write("a")
    world.ray.available = False
    caplog.set_level(logging.INFO, "rayqueue.loop")
    world.step(30, seconds=1.0)
    assert len(lines(caplog, "Ray unavailable")) == 1
    world.ray.available = True
    world.step(seconds=120)
    assert len(lines(caplog, "working again")) == 1
    assert len(world.ray.submitted) == 1


def test_submitted_is_logged_after_ray_accepted_and_the_uid_stays_while_unrecorded(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    world.write("ro1")
    store = world.reconciler.store
    real_write = store.write_status
    tried: list[str] = []

    def read_only(name: str, status: TaskStatus, **kwargs: object) -> bool:
        tried.append(status.status.uid or "")
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(store, "write_status", read_only)
    caplog.set_level(logging.INFO, "rayqueue.loop")
    world.step(5)
    assert world.ray.submitted == []
    assert lines(caplog, "submitted") == []
    assert len(tried) == 5 and len(set(tried)) == 1  # one uid, not one per pass
    monkeypatch.setattr(store, "write_status", real_write)
    world.step()
    [request] = world.ray.submitted
    assert tried[0] in request.submission_id
    assert lines(caplog, "submitted") == [
        f"submitted ro1 (priority 0, 1 CPU) as {request.submission_id}"
    ]


def test_a_submit_ray_did_not_take_is_not_logged_as_submitted(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.write("a")
    world.ray.fail_next("submit", RayUnavailable("timeout"))
    caplog.set_level(logging.INFO, "rayqueue.loop")
    world.step()
    assert world.ray.submitted == [] and lines(caplog, "submitted") == []


def test_an_unwritable_status_location_names_status_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert writes.status_location_problem(tmp_path, given=False) is None

    def probe(errno_: int) -> None:
        def fail(folder: Path) -> None:
            raise OSError(errno_, "nope")

        monkeypatch.setattr(writes, "_probe", fail)

    probe(errno.EROFS)
    problem = writes.status_location_problem(tmp_path, given=False)
    assert problem is not None and problem[0] and "--status-dir" in problem[1]
    probe(errno.ENOSPC)  # a full disk frees up: serve starts and recovers
    problem = writes.status_location_problem(tmp_path, given=False)
    assert problem is not None and not problem[0]
    probe(errno.EROFS)
    settings = Settings(tasks_dir=tmp_path / "tasks", api=False, queue_id="q")
    with pytest.raises(daemon.ServeError, match="--status-dir"):
        daemon.serve(settings)


def test_loop_keeps_no_unrecorded_status_once_written(world: World) -> None:
    world.write("a")
    world.step()
    rec: Reconciler = world.reconciler
    assert rec._unrecorded == {}
