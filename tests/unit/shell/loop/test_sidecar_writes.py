"""Sidecar writes: which are fsynced, which are written at once, which wait (and converge)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.core import durability
from reconciler.core.planner import Plan, Preemption, Stop, StopCause, Submit
from reconciler.shell.loop import writes
from reconciler.shell.ops import memory
from specs.cluster import RUNNING, Capacity, SubmitRequest
from specs.folder import atomic
from specs.folder.store import TaskStore
from specs.task.models import Metadata, Phase, Reason
from specs.task.status import TaskStatus, TaskStatusBody
from tests.support.clock import FakeClock
from tests.support.world import World


def st(phase: Phase = Phase.QUEUED, **body: object) -> TaskStatus:
    return TaskStatus(metadata=Metadata(name="t"), status=TaskStatusBody(phase=phase, **body))


def request(sid: str) -> SubmitRequest:
    return SubmitRequest(sid, "true", None, {})


# --- the rule --------------------------------------------------------------------------------


def test_ray_actions_and_run_records_are_durable() -> None:
    queued = st(queue_position=3)
    before = {n: queued for n in ("sub", "stop", "victim", "winner", "ended", "moved", "why")}
    plan = Plan(
        statuses={
            "sub": st(Phase.STARTING, submission_id="rq-sub-1", run=1),
            "stop": st(Phase.QUEUED, queue_position=9),  # position-only, but its job is stopped
            "victim": st(Phase.QUEUED, queue_position=1, preemptions=1),
            "winner": st(Phase.QUEUED, queue_position=2),
            "ended": st(Phase.SUCCEEDED),
            "moved": st(queue_position=4),
            "why": st(queue_position=3, reason="InflightLimit"),
            "same": queued,
        },
        submits=[Submit("sub", request("rq-sub-1"))],
        stops=[
            Stop("rq-stop-1", "stop", StopCause.SPEC_DELETED),
            Stop("rq-victim-1", "victim", StopCause.PREEMPTED, "p"),
        ],
        preemptions=[Preemption("winner", ("victim",), Reason.WITHIN_QUEUE, Capacity())],
    )
    before["same"] = queued
    acting = durability.acting(plan.submits, plan.stops, plan.timeouts, plan.preemptions)
    changed = {n: s for n, s in plan.statuses.items() if before.get(n) is not s}
    kinds = {n: durability.write_class(before.get(n), s, n in acting) for n, s in changed.items()}
    plan = replace(plan, write_classes=kinds)
    classes = writes.split(plan)
    assert classes.durable == {"sub", "stop", "victim", "winner", "ended"}
    assert classes.deferred == {"moved"}
    assert classes.prompt == {"why"}


def test_deferrable_is_a_first_queued_record_or_a_position_change_only() -> None:
    assert durability.position_only(None, st(queue_position=7))
    assert not durability.position_only(None, st(Phase.INVALID))
    old = st(queue_position=7, message="7 tasks ahead", uid="u1")
    assert durability.position_only(old, st(queue_position=2, message="2 tasks ahead", uid="u1"))
    assert not durability.position_only(old, st(queue_position=2, uid="u2"))
    assert not durability.position_only(old, st(Phase.STARTING, queue_position=7, uid="u1"))
    assert not durability.position_only(old, st(queue_position=7, message="x", uid="u1", retries=1))


def test_records_a_run() -> None:
    running = st(Phase.RUNNING, submission_id="rq-a-1", run=1)
    assert durability.records_a_run(running, st(Phase.FAILED, submission_id="rq-a-1", run=1))
    assert not durability.records_a_run(running, st(Phase.RUNNING, submission_id="rq-a-1", run=1))
    assert durability.records_a_run(None, st(Phase.RUNNING, submission_id="rq-a-1", run=1))
    assert not durability.records_a_run(None, st(queue_position=1))


# --- the store -------------------------------------------------------------------------------


def counting_fsync(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    return calls


def test_write_atomic_fsyncs_only_when_durable(tmp_path: Path, monkeypatch) -> None:
    calls = counting_fsync(monkeypatch)
    atomic.write_atomic(tmp_path / "a", b"one", durable=False)
    assert calls == [] and (tmp_path / "a").read_bytes() == b"one"
    atomic.write_atomic(tmp_path / "a", b"two")
    assert len(calls) == 2  # the file, then the folder that holds the rename
    assert (tmp_path / "a").read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["a"]  # no temp file left behind


def test_deferred_statuses_are_read_back_then_flushed_front_first(tmp_path: Path) -> None:
    clock = FakeClock(100.0)
    store = TaskStore(tmp_path, clock=clock)
    store.read_statuses()
    for i, name in enumerate(["c", "a", "b"]):
        store.defer_status(name, st(queue_position=3 - i))
    assert not list(tmp_path.glob("*.status.yaml"))
    assert store.read_statuses(cached=True)["a"].status.queue_position == 2
    assert store.read_statuses()["c"].status.queue_position == 3  # a full read overlays them
    assert store.flush_statuses(budget=2, min_age=10) == 2
    assert sorted(p.name for p in tmp_path.glob("*.status.yaml")) == [
        "a.status.yaml",
        "b.status.yaml",
    ]
    assert store.deferred_statuses == 1
    assert store.flush_statuses(budget=2, min_age=10) == 1  # new records wait for no one


def test_position_changes_wait_min_age_and_the_longest_waiting_go_first(tmp_path: Path) -> None:
    clock = FakeClock(100.0)
    store = TaskStore(tmp_path, clock=clock)
    for name in ("a", "b"):
        store.write_status(name, st(queue_position=5), durable=False)
    store.defer_status("b", st(queue_position=1))
    clock.advance(4)
    store.defer_status("a", st(queue_position=2))
    store.defer_status("b", st(queue_position=3))  # keeps b's place: waiting since 100
    assert store.flush_statuses(budget=10, min_age=5) == 0
    clock.advance(1)
    assert store.flush_statuses(budget=1, min_age=5) == 1
    assert store.read_statuses()["b"].status.queue_position == 3
    assert "queuePosition: 5" in (tmp_path / "a.status.yaml").read_text()
    clock.advance(4)
    assert store.flush_statuses(budget=1, min_age=5) == 1
    assert "queuePosition: 2" in (tmp_path / "a.status.yaml").read_text()


def test_a_write_or_delete_replaces_what_was_deferred(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, clock=FakeClock())
    store.defer_status("a", st(queue_position=1))
    store.write_status("a", st(Phase.STARTING, submission_id="rq-a-1", run=1))
    store.defer_status("b", st(queue_position=2))
    store.delete_status("b")
    assert store.deferred_statuses == 0
    assert store.flush_statuses(budget=10, min_age=0) == 0
    statuses = store.read_statuses()
    assert set(statuses) == {"a"} and statuses["a"].status.phase is Phase.STARTING


# --- the loop --------------------------------------------------------------------------------


def test_only_write_ahead_records_are_fsynced(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    synced: list[str] = []
    real = atomic.replace_file

    def replace_file(
        path: Path, data: bytes, *, durable: bool, mode: int, **rest: bool
    ) -> atomic.StatKey:
        if durable:
            synced.append(path.name)
        return real(path, data, durable=durable, mode=mode, **rest)

    w = World.build(tasks, Capacity(2, 0, 2**34), store_options={"write_file": replace_file})
    for i in range(5):
        w.write(f"t{i}", priority=i)
    w.step()
    # The two that start record their submission ids, fsynced; the three that wait are
    # written too (new records, within the budget), but not fsynced.
    assert sorted(synced) == ["t3.status.yaml", "t4.status.yaml"]
    assert len(list(tasks.glob("*.status.yaml"))) == 5
    synced.clear()
    for job in w.our_jobs():
        w.ray.set_status(job.submission_id, RUNNING)
    w.step()
    assert synced == []  # Running is seen in Ray again after any crash


def test_queue_positions_converge_within_position_write_seconds(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    w = World.build(tasks, Capacity(1, 0, 2**34), position_write_seconds=5.0)
    w.write("running", priority=9)
    for i in range(4):
        w.write(f"w{i}", priority=i)
    w.step()
    assert w.status("w0")["queuePosition"] == 4
    w.write("urgent", priority=8)  # everyone behind it moves back one place
    w.step()
    assert w.status("urgent")["queuePosition"] == 1  # a new record: written at once
    assert w.status("w0")["queuePosition"] == 4  # a move only: not yet
    assert w.reconciler.store.read_statuses(cached=True)["w0"].status.queue_position == 5
    w.step(passes=5)
    assert [w.status(f"w{i}")["queuePosition"] for i in range(4)] == [5, 4, 3, 2]


def test_a_folder_of_new_specs_is_written_within_the_budget(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    w = World.build(tasks, Capacity(1, 0, 2**34), status_write_budget=4)
    for i in range(10):
        w.write(f"t{i}", priority=i)
    w.step()
    on_disk = sorted(p.name for p in tasks.glob("*.status.yaml"))
    # The one submitted, then the first four of the queue (t8 is first: priority 8).
    assert on_disk == [f"t{i}.status.yaml" for i in (5, 6, 7, 8, 9)]
    assert len(w.reconciler.store.read_statuses(cached=True)) == 10
    w.step(passes=2)
    assert len(list(tasks.glob("*.status.yaml"))) == 10


def test_memory_is_given_back_once_when_a_start_backlog_is_written(
    tmp_path: Path, monkeypatch
) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    w = World.build(tasks, Capacity(1, 0, 2**34), status_write_budget=4)
    for i in range(10):
        w.write(f"t{i}", priority=i)
    released: list[int] = []
    monkeypatch.setattr(memory, "release_free_memory", lambda: released.append(1) or True)
    w.step()
    assert released == []  # a backlog remains: the start is not over
    w.step(passes=2)
    assert len(list(tasks.glob("*.status.yaml"))) == 10
    assert released == [1]
    w.step(passes=2)
    assert released == [1]  # not every pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_free_memory_can_be_given_back_on_linux() -> None:
    assert memory.release_free_memory() is True
