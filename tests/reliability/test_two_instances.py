"""Fault 8, two instances: a second `rayqueue serve` on the same folder refuses to start and
names the lock holder; with --standby it waits and takes over when the holder dies. The lock
(an flock) dies with its holder, SIGKILL included."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.shell.ops.lock import LOCK_NAME, LockHeld, StateLock
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_QUEUE
from tests.reliability.conftest import ServeProcess
from tests.support.specs import read_status, write_task
from tests.support.waiting import wait_until


def test_lock_names_its_holder_and_is_released(tmp_path: Path) -> None:
    first = StateLock(tmp_path / "state" / LOCK_NAME)
    first.acquire(tasks_dir=tmp_path)
    second = StateLock(tmp_path / "state" / LOCK_NAME)
    with pytest.raises(LockHeld) as refused:
        second.acquire()
    holder = refused.value.holder
    assert holder.pid == os.getpid() and holder.hostname == socket.gethostname()
    assert holder.started_at and holder.tasks_dir == str(tmp_path.absolute())
    first.release()
    second.acquire()
    assert second.held
    second.release()


HOLD = """
import sys, time
from pathlib import Path
from reconciler.shell.ops.lock import StateLock
StateLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_lock_of_a_killed_holder_is_free_at_once(tmp_path: Path) -> None:
    path = tmp_path / LOCK_NAME
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, cwd=Path.cwd()
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        with pytest.raises(LockHeld) as refused:
            StateLock(path).acquire()
        assert refused.value.holder.pid == holder.pid
        holder.kill()
        holder.wait(10)
        lock = StateLock(path)
        lock.acquire()  # no stale-lock cleanup needed: the kernel dropped it with the process
        lock.release()
    finally:
        holder.kill()
        holder.wait(10)


@pytest.mark.ray
def test_second_serve_refuses_and_standby_takes_over(
    make_serve: Callable[..., ServeProcess], ray_head: str
) -> None:
    first = make_serve()
    first.start()
    first.wait_ready()
    assert first.proc is not None

    second = make_serve(tasks=first.tasks, queue_id=first.queue_id)
    second.start()
    assert second.wait(30) == 1
    message = second.log_text()
    assert f"pid {first.proc.pid} on {socket.gethostname()}" in message
    assert "--standby" in message and str(first.tasks) in message
    assert "watching" not in message  # refused before touching Ray or the folder

    standby = make_serve(tasks=first.tasks, queue_id=first.queue_id)
    standby.start(None, "--standby")
    wait_until(lambda: "standby:" in standby.log_text(), "the standby to wait")
    assert "watching" not in standby.log_text()

    write_task(first.tasks, "job", "python -c 'import time; time.sleep(3)'")
    wait_until(lambda: read_status(first.tasks, "job").get("phase") == "Running", "job to run")
    first.kill()  # SIGKILL: no clean-up, no unlock
    started = time.monotonic()
    wait_until(lambda: "taken over" in standby.log_text(), "the standby to take over", 10)
    took = time.monotonic() - started
    wait_until(lambda: read_status(first.tasks, "job").get("phase") == "Succeeded", "job to end")
    ray = RayJobsAdapter(ray_head, timeout_seconds=10)
    ours = [j for j in ray.list_jobs() if j.metadata.get(META_QUEUE) == first.queue_id]
    assert len(ours) == 1  # adopted by the new instance, not submitted again
    assert took < 5
    assert standby.terminate() == 0


def test_standby_leaves_quietly_when_told_to(tmp_path: Path) -> None:
    """A standby stopped (SIGTERM) before it took over exits cleanly, touching nothing."""
    tasks = tmp_path / "tasks"
    lock = StateLock(tasks / ".rayqueue" / LOCK_NAME)
    lock.acquire(tasks_dir=tasks)
    try:
        standby = ServeProcess(
            tasks=tasks, address="http://127.0.0.1:9", queue_id="q", logs=tmp_path / "logs"
        )
        standby.start(None, "--standby")
        wait_until(lambda: "standby:" in standby.log_text(), "the standby to wait")
        assert standby.terminate() == 0
        assert "watching" not in standby.log_text()
    finally:
        lock.release()
