"""serve's first pass runs with no automatic collection and freezes what it built after it
(reconciler/app/runtime.first_pass_gc: a large folder's cold start). Only that pass,
only in serve: a loop a test builds keeps the GC as it is."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import reconciler.app.daemon
from benchmarks.common import serve_settings
from reconciler.app.assembly import build_reconciler
from reconciler.app.runtime import first_pass_gc
from reconciler.core.planner import Plan
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.settings.process import Settings
from tests.support.specs import read_status, write_task


@pytest.fixture
def freezes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """gc.freeze recorded (with whether collection was on then), not done: a test process
    must not keep every object it has made."""
    calls: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(gc.isenabled()))
    return calls


@pytest.fixture
def gc_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_no_collection_during_the_pass_and_what_it_built_is_frozen_after(
    freezes: list[bool], gc_on: None
) -> None:
    with first_pass_gc():
        assert not gc.isenabled()
        assert freezes == []
    assert gc.isenabled()
    assert freezes == [False]  # frozen before collection is back on: nothing collected between


def test_a_pass_that_fails_still_gets_the_gc_back_and_its_error_goes_up(
    freezes: list[bool], gc_on: None
) -> None:
    with pytest.raises(OSError, match="disk"), first_pass_gc():
        raise OSError("disk")
    assert gc.isenabled()
    assert freezes == [False]


def test_collection_left_off_by_the_caller_stays_off(freezes: list[bool]) -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with first_pass_gc():
            pass
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


@contextmanager
def _counted(into: list[int], passes: list[str]) -> Iterator[None]:
    into.append(len(passes))  # the pass it wraps is the next one
    yield


def test_the_loop_runs_only_its_first_pass_inside_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = build_reconciler(
        Settings(tasks_dir=tmp_path, queue_id="q"), FakeRay(Capacity(4, 0, 2**34))
    )
    stop = threading.Event()
    passes: list[str] = []

    def run_pass() -> Plan | None:
        passes.append("pass")
        if len(passes) == 1:
            raise OSError("the first pass fails")  # logged; the next one is not wrapped again
        if len(passes) == 4:
            stop.set()
        return None

    monkeypatch.setattr(rec, "run_pass", run_pass)
    monkeypatch.setattr(rec, "next_wait", lambda elapsed=0.0: 0.0)
    wrapped: list[int] = []
    rec.run(stop, lambda: _counted(wrapped, passes))
    assert len(passes) == 4
    assert wrapped == [0]  # the first pass only


def test_the_first_pass_under_it_plans_and_writes_what_it_does_without(
    tmp_path: Path, freezes: list[bool], gc_on: None
) -> None:
    results = []
    for wrapped in (False, True):
        tasks = tmp_path / f"tasks-{wrapped}"
        tasks.mkdir()
        for i in range(20):
            write_task(tasks, f"t{i:02d}", priority=i % 3)
        rec = build_reconciler(
            serve_settings(tasks, "--queue-id", "q"),
            FakeRay(Capacity(4, 0, 2**34)),
            clock=lambda: 1_700_000_000.0,
        )
        if wrapped:
            with first_pass_gc():
                plan = rec.run_pass()
        else:
            plan = rec.run_pass()
        assert plan is not None
        while rec.store.deferred_statuses:
            rec.run_pass()
        submitted = sorted(s.task for s in plan.submits)
        statuses = {f"t{i:02d}": read_status(tasks, f"t{i:02d}") for i in range(20)}
        results.append((submitted, statuses))
    assert freezes == [False]
    assert results[0][0] == results[1][0]
    assert len(results[0][0]) == 4
    assert results[0][1] == results[1][1]
    assert all(s.get("phase") for s in results[1][1].values())


def test_serve_runs_its_first_pass_under_first_pass_gc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[object] = []

    class Started(Exception):
        pass

    def start_loop(rec: object, stop: object, first: object = None) -> None:
        given.append(first)
        raise Started

    monkeypatch.setattr(reconciler.app.daemon, "tune_gc", lambda: None)
    monkeypatch.setattr(reconciler.app.daemon, "start_loop", start_loop)
    settings = Settings(tasks_dir=tmp_path, address="http://127.0.0.1:9", api=False)
    with pytest.raises(Started):
        reconciler.app.daemon.serve(settings)
    assert given == [first_pass_gc]
