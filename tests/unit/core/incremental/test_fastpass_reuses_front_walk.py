"""The fast pass reuses the last walk over the queue's front when nothing the walk reads has changed
(reconciler.core.incremental.frontadmission.walk_front): a busy queue's passes that only move an
active task's status (its job PENDING, then RUNNING) give the same answer as the pass before, and
the full `plan()` agrees in every field at every pass (History's check). The sequence property
(tests/unit/core/incremental/test_sequences.py) plays random histories with it on."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from reconciler.core.admission import policies
from reconciler.core.admission.waits import ReservedStart, Waiting, shortfall
from reconciler.core.incremental import frontadmission
from reconciler.core.incremental.frontadmission import FrontWalk, walk_front
from reconciler.core.inputs import Observation
from specs.cluster import RUNNING, Capacity
from specs.settings.process import PlanOptions
from tests.support.busy_queue import busy_queue, end_one, settle, start_all
from tests.support.incremental_history import History, assert_identical
from tests.support.planner_world import GIB
from tests.unit.core.incremental.test_sequences import (
    EXAMPLES,
    OUTCOMES,
    TEAMS,
    Sequence,
    names_of,
    queues_of,
)


def _busy(policy: str, timeout: float, inflight: int = 1000) -> History:
    """A full 4-CPU cluster and 60 waiting 1-CPU tasks (each `timeout` seconds at most)."""
    return busy_queue(policy, timeout, tasks=60, exact=5, inflight=inflight)


@pytest.mark.parametrize("policy", ["strict", "backfill", "besteffort"])
@pytest.mark.parametrize("timeout", [0, 50])
def test_the_running_pass_of_a_busy_queue_reuses_the_walk(policy: str, timeout: float) -> None:
    """Each job that ends: the pass that sees it submits the next (a new walk: a start), the
    next sees the new job (a new walk: the started task holds its CPU now), and the one that
    sees it RUNNING reuses that walk (only a Starting task became Running: one more slot, no
    other input moved). Every pass equals plan() in every field."""
    world = _busy(policy, timeout)
    settle(world)
    before = world.reused
    for _ in range(6):
        # the end (the next submitted), its job PENDING (History's Ray takes a submit as
        # PENDING at once), then RUNNING: the walk reused
        end_one(world)
        assert world.memo.fast and world.memo.order is not None
        assert world.memo.order.reused, policy
    assert world.reused - before >= 6


def test_an_inflight_limit_reached_is_not_reused_as_free_slots() -> None:
    """With max_inflight 1, the pass that sees the new job still Starting has no slot; when it
    runs, one comes back: a walk with no slot and one with a slot differ, and the walk is done
    again (as plan() does: the answer equals it)."""
    world = _busy("backfill", 50, inflight=1)
    world.run_pass()
    start_all(world)
    world.run_pass()
    world.run_pass()
    end_one(world)
    assert world.memo.fast and world.memo.order is not None
    assert not world.memo.order.reused


def _walk(start: list[str], note_at: float | None, slots: int = 3) -> FrontWalk:
    first = policies.Candidate("a", Capacity(2, 0, 0), 0)
    waiting = {}
    if note_at is not None:
        lack = shortfall(first.request, Capacity(1, 0, 0))
        waiting["a"] = Waiting(lack, 0, note=ReservedStart(note_at))
    admission = policies.Admission(start=list(start), waiting=waiting)
    until = frontadmission._holds_until(admission, [first], 100.0, "backfill")
    return FrontWalk("backfill", 5, [first], Capacity(1, 0, 0), slots, [], until, admission)


def test_a_walk_holds_until_the_reserved_start_and_a_start_only_at_its_instant() -> None:
    """Backfill that started nothing reads the clock only through the first task's reserved start
    (max(the claims' end, now)): its answer holds until then. A start's claim counts from now:
    that instant only. Strict and besteffort never read the clock."""
    assert _walk([], 130.0).holds_until == 130.0
    assert _walk([], 100.0).holds_until == 100.0  # the start is `now`: it moves with it
    assert _walk([], None).holds_until == float("inf")
    assert _walk(["b"], None).holds_until == 100.0
    admission = policies.Admission()
    assert frontadmission._holds_until(admission, [], 100.0, "strict") == float("inf")


def test_slots_compare_by_sign_only_for_a_walk_that_started_nothing() -> None:
    """A walk reads its slots as `slots > 0` until it starts a task: any other positive count
    walks the same, no slot at all does not; a walk that started one read the count."""
    idle = _walk([], 130.0, slots=3)
    assert frontadmission._same_slots(idle, 4)
    assert not frontadmission._same_slots(idle, 0)
    assert not frontadmission._same_slots(_walk(["b"], None, slots=3), 4)


class _Ctx:
    """What walk_front reads of a pass, with the given values."""

    def __init__(self, now: float, free: Capacity, options: PlanOptions) -> None:
        self.now, self.options, self.claims, self.queues = now, options, [], None
        self.obs = Observation(None, free)
        self.used = self.unobserved = Capacity()
        self.bodies: dict[str, Any] = {}


def test_walk_front_walks_again_once_now_passes_what_the_last_walk_holds_to() -> None:
    """The same inputs at a `now` past the last walk's `holds_until` walk again (backfill's
    reserved start would be `now` then); before it, the last walk is reused as it is."""
    options = PlanOptions(queue_id="q", policy="backfill", backfill_candidates=5)
    front = policies.Candidate("a", Capacity(2, 0, 0), 0)
    prefix = [front]
    last = dataclasses.replace(_walk([], 130.0), candidates=prefix)
    free = Capacity(1, 0, 0)
    again, reused = walk_front(_Ctx(129.0, free, options), prefix, last)  # type: ignore[arg-type]
    assert reused and again is last
    again, reused = walk_front(_Ctx(131.0, free, options), prefix, last)  # type: ignore[arg-type]
    assert not reused and again is not last


# Busy-queue histories for the property below: mostly status-only moves of live jobs (a job
# seen RUNNING, PENDING ones started, a job listed again as an equal new object), ends that
# start the next, the clock moving by small steps (timeouts and reserved starts close to
# `now`), with an arrival, an edit, a foreign job or a capacity change now and then.
_EDITS = (("priority", 0), ("priority", 9), ("cpu", 1), ("cpu", 2), ("timeoutSeconds", 5))
_BUSY_STEPS = st.one_of(
    st.tuples(st.just("ray"), st.integers(0, 50), st.just(RUNNING), st.just(1)),
    st.tuples(st.just("ray"), st.integers(0, 50), st.sampled_from(OUTCOMES), st.just(1)),
    st.tuples(st.just("start_all")),
    st.tuples(st.just("rebuild")),
    st.tuples(st.just("tick"), st.sampled_from((0, 0.25, 1, 4.999, 5, 5.001, 49.9, 50))),
    st.tuples(st.just("add"), st.integers(1, 5), st.integers(0, 2**16)),
    st.tuples(st.just("edit"), st.integers(1, 3), st.integers(0, 199)).flatmap(
        lambda edit: st.sampled_from(_EDITS).map(lambda change: edit + change)
    ),
    st.tuples(st.just("foreign"), st.integers(0, 3)),
    st.tuples(st.just("capacity"), st.sampled_from([4, 8])),
)
REUSED = {"passes": 0, "fast": 0, "reused": 0}


@settings(
    max_examples=max(EXAMPLES // 3, 1), deadline=None, suppress_health_check=list(HealthCheck)
)
@given(
    policy=st.sampled_from(["strict", "backfill", "besteffort"]),
    exact=st.sampled_from([1, 3, 12]),
    inflight=st.sampled_from([1, 2, 1000]),
    bound=st.sampled_from([0, 2, 500]),
    teams=st.sampled_from([None, TEAMS]),
    size=st.sampled_from([40, 100]),
    first=st.integers(0, 2**16),
    sequence=st.lists(_BUSY_STEPS, min_size=1, max_size=40),
)
def test_busy_sequences_with_the_walk_reused_equal_plan(
    policy: str,
    exact: int,
    inflight: int,
    bound: int,
    teams: str | None,
    size: int,
    first: int,
    sequence: list[tuple[Any, ...]],
) -> None:
    """At every pass of a busy queue's history, the incremental plan (reusing the last walk
    where it may) equals plan() in every field, deadline and write classes included."""
    options = PlanOptions(
        queue_id="q",
        policy=policy,
        exact_queue_positions=exact,
        max_inflight=inflight,
        backfill_candidates=bound,
    )
    world = History(
        options,
        queues_of(teams),
        capacity=Capacity(4, 0, 64 * GIB),
        check=assert_identical,
        every_field=True,
    )
    run = Sequence(world, names_of(size), plain=True)
    run.run(("add", size // 2, first))
    run.run(("start_all",))
    for step in sequence:
        run.run(step)
        if step[0] == "ray":
            run.run(("start_all",))  # the next job's PENDING seen, then RUNNING
    note(f"fast {world.fast_passes} of {world.passes}, walks reused {world.reused}")
    REUSED["passes"] += world.passes
    REUSED["fast"] += world.fast_passes
    REUSED["reused"] += world.reused
