"""The least-served queue's own later tasks never push its blocked head back: under backfill with
team queues, when the queue with the lowest share starts one of its own tasks past its head
(`fairshare._own_first`), the head's reserved start, with every running claim held to its declared
bound, is no later than it was before that start: the task fits beside the head (now or at that
start) or ends, by its timeout, before it."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from hypothesis import given, note, settings
from hypothesis import strategies as st

from reconciler.core.admission.policies import POLICIES, Candidate, Claim, reserve
from reconciler.core.queues import fairshare
from reconciler.core.queues.fairshare import NO_LIMIT, QueueDemand, QueueQuota, admit
from specs.cluster import Capacity

CLUSTER = Capacity(16, 0, 0)


def cpu(n: float) -> Capacity:
    return Capacity(n, 0, 0)


TIMEOUTS = st.sampled_from([0, 20, 50, 100, 150, 400])


@st.composite
def passes(draw: st.DrawFn) -> tuple[list[Claim], list[QueueDemand]]:
    """b runs 1-6 claims (some unbounded), a (least served: it holds nothing) waits with a
    head and 1-5 later tasks, b waits with 0-3 more; the default queue lends the cluster."""
    claims: list[Claim] = []
    held = 0
    for _ in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 6))
        if held + size > 16:
            break
        held += size
        end = draw(st.sampled_from([None, 10.0, 40.0, 80.0, 120.0, 300.0]))
        claims.append(Claim(cpu(size), end))
    head = Candidate("a/head", cpu(draw(st.integers(1, 16))), draw(TIMEOUTS))
    later = [
        Candidate(f"a/{i}", cpu(draw(st.integers(1, 8))), draw(TIMEOUTS))
        for i in range(draw(st.integers(1, 5)))
    ]
    others = [
        Candidate(f"b/{i}", cpu(draw(st.integers(1, 8))), draw(TIMEOUTS))
        for i in range(draw(st.integers(0, 3)))
    ]

    def queue(name: str, usage: float, tasks: list[Candidate]) -> QueueDemand:
        quota = QueueQuota(name, Capacity(), NO_LIMIT, NO_LIMIT, 1.0)
        return QueueDemand(quota, cpu(usage), tasks, POLICIES["backfill"])

    lender = QueueDemand(QueueQuota("default", CLUSTER), Capacity(), [], POLICIES["strict"])
    return claims, [queue("a", 0, [head, *later]), queue("b", held, others), lender]


@settings(max_examples=400, deadline=None)
@given(passes(), st.integers(1, 4))
def test_the_least_served_queues_own_start_never_pushes_its_head_back(
    case: tuple[list[Claim], list[QueueDemand]], slots: int
) -> None:
    claims, demands = case
    free = CLUSTER
    for claim in claims:
        free = free - claim.request
    a, b = demands[0], demands[1]
    # What `_own_first` picked (a's own backfill, within its quota view, keeps its own order).
    own: list[str] = []
    original = fairshare._FairShareRun._own_first

    def recorded(self: fairshare._FairShareRun, queue: Any, budget: Capacity) -> Candidate | None:
        found = original(self, queue, budget)
        if found is not None:
            own.append(found.name)
        return found

    with patch.object(fairshare._FairShareRun, "_own_first", recorded):
        result = admit(CLUSTER, free, demands, claims, 0.0, slots, fairshare.BACKFILL_RESERVATION)
    note(f"claims={claims} a={a.candidates} b={b.candidates} slots={slots} start={result.start}")
    # Replay the pass's starts in order: each own pick past a queue's head (its first task not
    # yet started) keeps that head's reserved start.
    waiting = {q.quota.name: list(q.candidates) for q in demands}
    for name in result.start:
        queue = name.split("/")[0]
        task = next(c for c in waiting[queue] if c.name == name)
        if name in own:
            head = waiting[queue][0]
            assert task is not head
            before = reserve(head.request, free, claims, 0.0)
            if before is None:
                # no start can be promised: only what fits beside the head now may pass
                assert (task.request + head.request).fits_in(free)
            else:
                ends = task.timeout_seconds if task.timeout_seconds > 0 else None
                claims_after = [*claims, Claim(task.request, ends)]
                after = reserve(head.request, free - task.request, claims_after, 0.0)
                assert after is not None
                assert after.start <= before.start
        waiting[queue].remove(task)
        ends_by = task.timeout_seconds if task.timeout_seconds > 0 else None
        claims = [*claims, Claim(task.request, ends_by)]
        free = free - task.request
