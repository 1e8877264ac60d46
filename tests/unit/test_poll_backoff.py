"""The busy poll backs off with the quiet time: fast while things change, about once an
interval when a long job runs and nothing else happens."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reconciler.loop import Reconciler
from reconciler.raycluster.fake import FakeRay
from specs.cluster import RUNNING, Capacity
from specs.settings import Settings
from specs.store import TaskStore
from tests.support.specs import write_task


def make(tmp_path: Path, backoff: float) -> tuple[Reconciler, FakeRay]:
    settings = Settings(tasks_dir=tmp_path, queue_id="q", api=False, busy_backoff=backoff)
    ray = FakeRay(Capacity(2, 0, 2**34))
    return Reconciler(settings, TaskStore(tmp_path), ray), ray


@pytest.mark.parametrize(
    ("quiet", "backoff", "wait"),
    [
        (0.0, 0.05, 0.1),  # something just changed: the fast poll
        (1.0, 0.05, 0.1),  # 5 % of 1 s is below the fast poll
        (10.0, 0.05, 0.5),  # 5 % of 10 s
        (100.0, 0.05, 1.0),  # never slower than the idle interval
        (100.0, 0.0, 0.1),  # no backoff: always the fast poll
    ],
)
def test_the_busy_wait_grows_with_the_quiet_time(
    tmp_path: Path, quiet: float, backoff: float, wait: float
) -> None:
    rec, _ray = make(tmp_path, backoff)
    rec.state.queued, rec.state.running = 3, 1
    rec.state.changed_at = time.monotonic() - quiet
    assert rec.next_wait() == pytest.approx(wait, abs=0.01)
    rec.state.running = 0  # nothing runs: nothing to notice the end of
    assert rec.next_wait() == rec.settings.interval_seconds


def test_a_pass_that_changes_something_restarts_the_fast_poll(tmp_path: Path) -> None:
    rec, ray = make(tmp_path, 0.05)
    write_task(tmp_path, "big", "sleep 1000", cpu=2, priority=9)
    write_task(tmp_path, "small", "echo hi", cpu=1)
    rec.run_pass()
    rec.state.changed_at = time.monotonic() - 100  # a long quiet stretch
    assert rec.next_wait() == pytest.approx(1.0)
    ray.set_status(next(iter(ray.jobs)), RUNNING)  # Ray says something new
    rec.run_pass()
    assert rec.next_wait() == pytest.approx(0.1, abs=0.01)


def test_a_backlog_of_first_records_is_written_at_the_busy_pace(tmp_path: Path) -> None:
    settings = Settings(
        tasks_dir=tmp_path, queue_id="q", api=False, status_write_budget=2, settle_seconds=0
    )
    rec = Reconciler(settings, TaskStore(tmp_path), FakeRay(Capacity(1, 0, 2**34)))
    write_task(tmp_path, "blocker", "sleep 1000", cpu=1, priority=9)
    for i in range(7):
        write_task(tmp_path, f"t{i}", "echo hi", cpu=1)
    rec.run_pass()
    waits = []
    while rec.store.deferred_statuses:
        rec.state.changed_at = time.monotonic() - 100  # long quiet: the backoff would say 1 s
        waits.append(rec.next_wait())
        rec.run_pass()
    assert waits and all(w == pytest.approx(0.1) for w in waits)
    rec.state.changed_at = time.monotonic() - 100
    assert rec.next_wait() == pytest.approx(1.0)  # all written: the backoff again
    assert all((tmp_path / f"t{i}.status.yaml").exists() for i in range(7))
