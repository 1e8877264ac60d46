"""A job listed PENDING (its task Starting, the start's claim now the Starting task's) makes the
fast pass walk the queue's head anew: the walk's inputs moved
(reconciler/core/incremental/fastpass.py).
Most often its answer is the last pass's, the started task gone from its front: every waiting
task keeps its place and wait. Those are compared task by task and a task that kept the status
the last pass gave it is left as it is (`admit_prefix`'s `standing`), as in a pass that reuses
the walk: no status is set anew, where every exact place was. Every pass equals plan() in every
field (History's check); the sequence property (tests/unit/core/incremental/test_sequences.py)
plays random histories with it on."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.core.incremental import fastpass, frontadmission
from specs.cluster import SUCCEEDED
from tests.support.busy_queue import busy_queue, settle, start_all
from tests.support.incremental_history import History

EXACT, INFLIGHT, BOUND = 5, 3, 40


def _busy(policy: str, timeout: float) -> History:
    """A 4-CPU cluster and 120 waiting 1-CPU tasks (each `timeout` seconds at most)."""
    return busy_queue(policy, timeout, tasks=120, exact=EXACT, inflight=INFLIGHT, candidates=BOUND)


class _Counted:
    """admit_prefix, counting the statuses each call set anew (Walk.touched)."""

    def __init__(self) -> None:
        self.touched: list[list[str]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> frontadmission.Walk:
        walk = frontadmission.admit_prefix(*args, **kwargs)
        self.touched.append(list(walk.touched))
        return walk


def _cycle(world: History, counted: _Counted) -> list[int]:
    """A job ends (the next is submitted), its job is listed PENDING, then RUNNING: the
    statuses the head's admission set anew in each of the three passes."""
    world.apply(("tick", 1))
    world.apply(("ray", 0, SUCCEEDED, 0))
    counted.touched.clear()
    world.run_pass()
    world.run_pass()
    start_all(world)
    world.run_pass()
    assert len(counted.touched) == 3, "every pass is a fast one over the one queue's head"
    return [len(t) for t in counted.touched]


def _settled(policy: str, timeout: float) -> History:
    world = _busy(policy, timeout)
    settle(world)
    return world


@pytest.mark.parametrize("policy", ["strict", "backfill", "besteffort"])
def test_the_pending_pass_leaves_the_head_as_it_stands(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end moves every exact place up by one (and starts the next task); the PENDING pass
    walks anew to the same places and waits, and the RUNNING pass reuses that walk: neither
    sets a status anew."""
    counted = _Counted()
    monkeypatch.setattr(fastpass, "admit_prefix", counted)
    world = _settled(policy, 0)
    for _ in range(4):
        end, pending, running = _cycle(world, counted)
        assert end >= EXACT + 1  # the start and the exact places, each one place up
        assert (pending, running) == (0, 0)


def test_declared_ends_still_equal_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backfill with declared ends: the head's reserved start reads the claims' ends, which the
    Starting task's claim moves; whatever stands or not, every pass equals plan()."""
    counted = _Counted()
    monkeypatch.setattr(fastpass, "admit_prefix", counted)
    world = _settled("backfill", 50)
    for _ in range(4):
        end, pending, running = _cycle(world, counted)
        assert end >= EXACT + 1
        assert (pending, running) == (0, 0)


@pytest.mark.parametrize("policy", ["strict", "backfill"])
def test_a_place_moved_in_the_pending_pass_is_set_anew(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task put at the front of the queue as the job is listed PENDING: every waiting task
    keeps the status the last pass gave it, but its place is one further: each exact place is
    set anew (a check by status alone would leave them one place off plan()'s)."""
    counted = _Counted()
    monkeypatch.setattr(fastpass, "admit_prefix", counted)
    world = _settled(policy, 0)
    for i in range(3):
        world.apply(("tick", 1))
        world.apply(("ray", 0, SUCCEEDED, 0))
        counted.touched.clear()
        world.run_pass()
        world.apply(("put", f"a{i}", {"priority": 9, "cpu": 1}))
        world.run_pass()
        start_all(world)
        world.run_pass()
        assert len(counted.touched[1]) >= EXACT + 1  # the new task and the places behind it
