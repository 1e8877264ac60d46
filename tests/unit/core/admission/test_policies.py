"""The admission policies on their own, table-driven, plus property tests of backfill's promise."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.admission.policies import (
    POLICIES,
    Admission,
    Candidate,
    Claim,
    backfill,
    besteffort,
    reserve,
    strict,
)
from reconciler.core.planner import PlanOptions
from specs.cluster import RUNNING, SUCCEEDED, Capacity
from specs.task.models import Phase, Reason
from tests.support.planner_world import PlanWorld, task

NOW = 1_000.0


def cpu(n: float) -> Capacity:
    return Capacity(cpu=n)


def cand(name: str, cpus: float, timeout: float = 0) -> Candidate:
    return Candidate(name, cpu(cpus), timeout)


def claim(cpus: float, ends_in: float | None) -> Claim:
    return Claim(cpu(cpus), None if ends_in is None else NOW + ends_in)


def test_registry_offers_all_three() -> None:
    assert set(POLICIES) == {"strict", "backfill", "besteffort"}
    assert POLICIES["backfill"] is backfill


# -- backfill, one pass at a time ------------------------------------------------------------
# Cluster of 8 CPUs; 6 are held by two running jobs that end by NOW+100 and NOW+300 at the
# latest. The head needs 6: it fits once the first claim (4 CPUs) ends, at NOW+100, and then
# 2 + 4 - 6 = 0 CPUs are spare.
RUNNING_CLAIMS = (claim(4, 100), claim(2, 300))


@pytest.mark.parametrize(
    ("queue", "started", "reasons"),
    [
        # the head fits: it starts, as under strict, and so does the next that fits
        ([cand("a", 1, 10), cand("b", 1, 500)], ["a", "b"], {}),
        # ends (by its timeout) before the head's reserved start: it may overtake
        (
            [cand("head", 6), cand("short", 2, 100)],
            ["short"],
            {"head": Reason.WAITING_FOR_RESOURCES},
        ),
        # would still hold its CPUs when the head is due: it must wait
        (
            [cand("head", 6), cand("long", 2, 101)],
            [],
            {"head": Reason.WAITING_FOR_RESOURCES, "long": Reason.WAITING_BEHIND_RESERVATION},
        ),
        # no timeout at all: it could run for ever, so only spare CPUs would do; there are none
        (
            [cand("head", 6), cand("unbounded", 1, 0)],
            [],
            {"unbounded": Reason.WAITING_BEHIND_RESERVATION},
        ),
        # does not fit in what is free now, whatever its timeout
        ([cand("head", 6), cand("wide", 3, 5)], [], {"wide": Reason.WAITING_FOR_RESOURCES}),
        # backfilled tasks use up the free CPUs one by one
        (
            [cand("head", 6), cand("s1", 1, 50), cand("s2", 1, 50), cand("s3", 1, 50)],
            ["s1", "s2"],
            {"s3": Reason.WAITING_FOR_RESOURCES},
        ),
    ],
)
def test_backfill_table(
    queue: list[Candidate], started: list[str], reasons: dict[str, str]
) -> None:
    admission = backfill(queue, cpu(2), RUNNING_CLAIMS, NOW, 32)
    assert admission.start == started
    for name, reason in reasons.items():
        assert admission.waiting[name].reason == reason


def test_head_gets_estimate_and_says_so() -> None:
    admission = backfill([cand("head", 6), cand("long", 2, 500)], cpu(2), RUNNING_CLAIMS, NOW, 32)
    head = admission.waiting["head"]
    assert head.estimated_start == NOW + 100
    assert "reserved" in head.message and "needs 6 CPU" in head.message
    long = admission.waiting["long"]
    assert long.estimated_start is None
    assert "head's reserved start" in long.message


def test_spare_resources_take_long_and_unbounded_tasks() -> None:
    # At NOW+100 the head (4) finds 6 free: 2 are spare for ever, so any task may use them.
    queue = [cand("head", 4), cand("unbounded", 1, 0), cand("long", 1, 9_999)]
    assert backfill(queue, cpu(2), RUNNING_CLAIMS, NOW, 32).start == ["unbounded", "long"]
    # A head of 5 leaves 1 spare: the first takes it, the second must wait though 1 CPU is free.
    queue = [cand("head", 5), cand("unbounded", 1, 0), cand("long", 1, 9_999)]
    admission = backfill(queue, cpu(2), RUNNING_CLAIMS, NOW, 32)
    assert admission.start == ["unbounded"]
    assert admission.waiting["long"].reason == Reason.WAITING_BEHIND_RESERVATION


def test_claims_ending_together_are_all_spare() -> None:
    claims = [claim(2, 50), claim(2, 50), claim(2, 50)]
    res = reserve(cpu(3), cpu(0), claims, NOW)
    assert res is not None and res.start == NOW + 50 and res.extra == cpu(3)


def test_tasks_started_in_the_pass_count_for_the_shadow() -> None:
    # "first" takes the last 2 free CPUs until NOW+20; the head (8) then waits for everything.
    queue = [cand("first", 2, 20), cand("head", 8), cand("short", 1, 10)]
    admission = backfill(queue, cpu(2), RUNNING_CLAIMS, NOW, 32)
    assert admission.start == ["first"]
    assert admission.waiting["head"].estimated_start == NOW + 300


def test_unbounded_claim_the_head_needs_falls_back_to_strict() -> None:
    claims = [claim(4, 100), claim(2, None)]
    queue = [cand("head", 7), cand("short", 1, 1)]
    admission = backfill(queue, cpu(2), claims, NOW, 32)
    assert admission.start == []
    assert admission.waiting["head"].estimated_start is None
    assert "without timeoutSeconds" in admission.waiting["head"].message
    assert admission.waiting["short"].reason == Reason.WAITING_BEHIND_HIGHER_PRIORITY


def test_unbounded_claim_the_head_does_not_need_still_allows_a_reservation() -> None:
    claims = [claim(4, 100), claim(2, None)]
    queue = [cand("head", 6), cand("short", 1, 1)]
    admission = backfill(queue, cpu(2), claims, NOW, 32)
    assert admission.start == ["short"]
    assert admission.waiting["head"].estimated_start == NOW + 100


def test_a_claim_past_its_bound_reserves_from_now() -> None:
    res = reserve(cpu(4), cpu(0), [claim(4, -5)], NOW)
    assert res is not None and res.start == NOW


def test_inflight_limit() -> None:
    queue = [cand("a", 1, 1), cand("head", 8), cand("b", 1, 1), cand("c", 1, 1)]
    admission = backfill(queue, cpu(2), RUNNING_CLAIMS, NOW, 2)
    assert admission.start == ["a", "b"]
    assert admission.waiting["c"].reason == Reason.INFLIGHT_LIMIT
    admission = backfill(queue, cpu(2), RUNNING_CLAIMS, NOW, 1)
    assert admission.start == ["a"]
    assert {w.reason for w in admission.waiting.values()} == {Reason.INFLIGHT_LIMIT}


def test_every_queued_task_gets_a_reason() -> None:
    queue = [cand("head", 6), cand("short", 1, 10), cand("long", 1, 999), cand("wide", 5, 1)]
    for policy in (strict, backfill, besteffort):
        admission = policy(queue, cpu(2), RUNNING_CLAIMS, NOW, 32)
        assert set(admission.start) | set(admission.waiting) == {c.name for c in queue}
        assert not set(admission.start) & set(admission.waiting)


# -- through the planner: estimatedStartAt in the status --------------------------------------


def test_planner_reports_estimated_start_and_backfills() -> None:
    w = PlanWorld(
        {"running": task(9, 2, timeoutSeconds=100)}, options=PlanOptions(policy="backfill")
    )
    w.step()
    w.ray("running", RUNNING)
    w.step()  # observed Running: its claim ends by startedAt + 100 s
    started_at = w.status("running").started_at
    w.specs |= {
        "head": task(5, 4),
        "short": task(1, 1, timeoutSeconds=30),
        "long": task(1, 1, timeoutSeconds=3600),
    }
    p = w.step()
    assert [s.task for s in p.submits] == ["short"]
    head = w.status("head")
    assert head.phase is Phase.QUEUED and head.reason == Reason.WAITING_FOR_RESOURCES
    assert (head.estimated_start_at - started_at).total_seconds() == 100
    assert w.status("long").reason == Reason.WAITING_BEHIND_RESERVATION
    w.ray("running", SUCCEEDED)
    w.ray("short", SUCCEEDED)
    p = w.step()
    assert [s.task for s in p.submits] == ["head"]
    assert w.status("head").estimated_start_at is None


# -- properties: the reservation is kept -------------------------------------------------------


@st.composite
def pass_inputs(draw: st.DrawFn) -> tuple[list[Candidate], Capacity, list[Claim]]:
    free = cpu(draw(st.integers(0, 8)))
    claims = [
        Claim(cpu(c), None if end is None else NOW + end)
        for c, end in draw(
            st.lists(st.tuples(st.integers(1, 8), st.none() | st.integers(-10, 200)), max_size=6)
        )
    ]
    queue = [
        cand(f"t{i}", c, timeout)
        for i, (c, timeout) in enumerate(
            draw(
                st.lists(
                    st.tuples(st.integers(1, 12), st.sampled_from([0, 5, 50, 100, 150, 400])),
                    max_size=8,
                )
            )
        )
    ]
    return queue, free, claims


def _available_at(
    when: float,
    queue: Sequence[Candidate],
    admission: Admission,
    free: Capacity,
    claims: list[Claim],
) -> Capacity:
    """Free CPUs at `when` if every running and newly started job runs to its declared bound."""
    available = free
    for c in claims:
        if c.ends_by is not None and c.ends_by <= when:
            available = available + c.request
    for t in queue:
        if t.name in admission.start:
            available = available - t.request
            if t.timeout_seconds > 0 and NOW + t.timeout_seconds <= when:
                available = available + t.request
    return available


@settings(max_examples=400, deadline=None)
@given(pass_inputs())
def test_backfill_never_breaks_the_reservation(
    inputs: tuple[list[Candidate], Capacity, list[Claim]],
) -> None:
    queue, free, claims = inputs
    admission = backfill(queue, free, claims, NOW, 32)
    # Everything strict starts, backfill starts too, first and in the same order.
    strict_start = strict(queue, free, claims, NOW, 32).start
    assert admission.start[: len(strict_start)] == strict_start
    waiting = [t for t in queue if t.name not in admission.start]
    if not waiting:
        return
    head = waiting[0]
    estimate = admission.waiting[head.name].estimated_start
    if estimate is None:
        # No promise possible: nobody overtook the head (strict for this pass).
        assert admission.start == strict_start
        return
    assert estimate >= NOW
    # At the promised time the head fits, whatever the backfilled tasks do within their bounds.
    assert head.request.fits_in(_available_at(estimate, queue, admission, free, claims))
    # And the promise is the earliest: a moment earlier (before the previous release) it did not fit
    # even without backfilling, so the head starts no later than it would have under strict.
    releases = sorted(
        {c.ends_by for c in claims if c.ends_by is not None and c.ends_by < estimate}
        | {NOW + t.timeout_seconds for t in queue if t.name in strict_start and t.timeout_seconds}
    )
    before = max([r for r in releases if r < estimate], default=None)
    if before is not None and before >= NOW:
        strict_admission = Admission(start=list(strict_start))
        assert not head.request.fits_in(
            _available_at(before, queue, strict_admission, free, claims)
        )
