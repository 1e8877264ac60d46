"""Admission's walk is bounded (as Slurm's bf_max_job_test): backfill and besteffort
test at most `backfill_candidates` tasks past the first that cannot start; the rest wait
NotConsidered, counted in the Summary. Strict stops at its first misfit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.admission.policies import (
    Candidate,
    Claim,
    admit_bounded,
    backfill,
    besteffort,
    strict,
)
from reconciler.core.admission.waits import BehindTask, NotConsidered, Waiting
from specs.cluster import Capacity
from specs.settings.process import PlanOptions
from specs.task.models import Reason
from tests.support.planner_world import GIB, PlanWorld, task

NOW = 1_000.0


def _cand(name: str, cpus: float, timeout: float = 0) -> Candidate:
    return Candidate(name, Capacity(cpu=cpus), timeout)


# A 4-CPU head that does not fit 2 free CPUs, then three small tasks that would all fit.
QUEUE = [_cand("big", 4), _cand("a", 1), _cand("b", 1), _cand("c", 1)]


def test_besteffort_tests_at_most_the_bound_past_the_first_misfit() -> None:
    unbounded = besteffort(QUEUE, Capacity(cpu=2), [], NOW, 8)
    assert unbounded.start == ["a", "b"]
    bounded = besteffort(QUEUE, Capacity(cpu=2), [], NOW, 8, bound=1)
    assert bounded.start == ["a"]  # b would fit, but it is past the bound
    assert bounded.waiting["b"] == Waiting(NotConsidered(1), 1)
    assert bounded.waiting["c"] == Waiting(NotConsidered(1), 2)
    assert bounded.waiting["b"].reason is Reason.NOT_CONSIDERED


def test_the_bound_counts_from_the_first_misfit_not_from_the_head() -> None:
    queue = [_cand("a", 1), _cand("b", 1), _cand("big", 4), _cand("c", 1)]
    result = besteffort(queue, Capacity(cpu=3), [], NOW, 8, bound=1)
    assert result.start == ["a", "b", "c"]


def test_backfill_tests_at_most_the_bound_past_the_reserved_head() -> None:
    claims = [Claim(Capacity(cpu=2), NOW + 100)]
    unbounded = backfill(QUEUE, Capacity(cpu=2), claims, NOW, 8)
    assert unbounded.start == []  # none has a timeout that ends before the reservation...
    short = [QUEUE[0]] + [_cand(n, 1, timeout=10) for n in ("a", "b", "c")]
    assert backfill(short, Capacity(cpu=2), claims, NOW, 8).start == ["a", "b"]
    bounded = backfill(short, Capacity(cpu=2), claims, NOW, 8, bound=1)
    assert bounded.start == ["a"]
    assert bounded.waiting["b"].lacks == NotConsidered(1)
    assert bounded.waiting["c"].lacks == NotConsidered(1)


def test_strict_is_unchanged_behind_its_first_misfit() -> None:
    result = strict(QUEUE, Capacity(cpu=2), [], NOW, 8)
    assert result.waiting["c"] == Waiting(BehindTask("big"), 3)


def test_a_pass_says_the_bound_in_the_status_and_the_summary() -> None:
    # 4 CPUs: t0 (3) starts; t1 (3) is the first misfit; t2 is tested and starts; t3 and t4
    # would fit too but are past the bound of 1.
    specs = {"t0": task(cpu=3, priority=3), "t1": task(cpu=3, priority=2)}
    specs |= {f"t{i}": task(cpu=1, priority=1) for i in range(2, 5)}
    options = PlanOptions(queue_id="q", policy="besteffort", backfill_candidates=1)
    world = PlanWorld(specs, capacity=Capacity(4, 0, 16 * GIB), options=options)
    plan = world.step()
    assert sorted(s.task for s in plan.submits) == ["t0", "t2"]
    assert plan.summary is not None and plan.summary.not_considered == 2
    status = world.status("t4")
    assert status.reason == Reason.NOT_CONSIDERED
    assert "at most 1 task past the first that cannot start" in (status.message or "")
    unbounded = PlanOptions(queue_id="q", policy="besteffort")
    world = PlanWorld(specs, capacity=Capacity(4, 0, 16 * GIB), options=unbounded)
    plan = world.step()
    assert plan.summary is not None and plan.summary.not_considered == 0


@settings(max_examples=300, deadline=None)
@given(
    policy=st.sampled_from(["strict", "backfill", "besteffort"]),
    sizes=st.lists(st.sampled_from([1, 1, 2, 3, 5]), max_size=12),
    timeouts=st.lists(st.sampled_from([0, 10, 200]), min_size=12, max_size=12),
    free=st.integers(0, 6),
    slots=st.integers(0, 5),
    bound=st.sampled_from([None, 0, 1, 3]),
    held=st.sampled_from([None, 50.0, 500.0]),
)
def test_the_walk_says_where_every_later_task_waits_alike(
    policy: str,
    sizes: list[int],
    timeouts: list[int],
    free: int,
    slots: int,
    bound: int | None,
    held: float | None,
) -> None:
    """The tail the policy reports holds: from its index on, each task waits for that lack,
    whatever follows (so a prefix of the queue gives the same answer for its tasks)."""
    queue = [_cand(f"t{i}", c, timeouts[i]) for i, c in enumerate(sizes)]
    claims = [Claim(Capacity(cpu=2), None if held is None else NOW + held)]
    result = admit_bounded(policy, queue, Capacity(cpu=free), claims, NOW, slots, bound)
    if result.tail is None:
        return
    index, lack = result.tail
    for position, later in enumerate(queue[index:], start=index):
        assert result.waiting[later.name] == Waiting(lack, position - len(result.start))
    # The policy on any longer prefix says the same about the head before the tail.
    for cut in range(index, len(queue) + 1):
        again = admit_bounded(policy, queue[:cut], Capacity(cpu=free), claims, NOW, slots, bound)
        assert again.start == result.start
        assert {n: again.waiting[n] for n in again.waiting} == {
            n: result.waiting[n] for n in again.waiting
        }
