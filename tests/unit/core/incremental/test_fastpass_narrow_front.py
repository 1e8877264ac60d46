"""The fast pass walks the single queue's narrow front (its exact places and the tasks that may
start: `exact_queue_positions + max_inflight + 2`) first, and the wide one (plus
`backfill_candidates`) only when the policy's walk does not end in the narrow one
(reconciler/core/incremental/fastpass.py). A full cluster whose jobs declare no end gives backfill
no
reservation: everyone waits behind the first task, and the walk ends one task past it. Every pass
equals plan() in every field (History's check); the sequence property
(tests/unit/core/incremental/test_sequences.py) plays random histories with it on."""

from __future__ import annotations

import pytest

from specs.cluster import SUCCEEDED
from tests.support.busy_queue import busy_queue, settle, start_all
from tests.support.incremental_history import History

EXACT, INFLIGHT, BOUND = 5, 3, 40
NARROW = EXACT + INFLIGHT + 2


def _busy(policy: str, timeout: float) -> History:
    """A 4-CPU cluster and 120 waiting 1-CPU tasks (each `timeout` seconds at most)."""
    return busy_queue(policy, timeout, tasks=120, exact=EXACT, inflight=INFLIGHT, candidates=BOUND)


def _walked(world: History) -> int:
    """How many candidates the last fast pass gave the policy's walk."""
    assert world.memo.fast and world.memo.order is not None
    walk = world.memo.order.front_walk
    assert walk is not None
    return len(walk.candidates)


def _cycle(world: History) -> list[int]:
    """A job ends (the next is submitted), its job is listed PENDING, then RUNNING: the
    candidates walked in each of the three passes."""
    world.apply(("tick", 1))
    world.apply(("ray", 0, SUCCEEDED, 0))
    walked = []
    world.run_pass()
    walked.append(_walked(world))
    world.run_pass()
    walked.append(_walked(world))
    start_all(world)
    world.run_pass()
    walked.append(_walked(world))
    return walked


def _settled(policy: str, timeout: float) -> History:
    world = _busy(policy, timeout)
    settle(world)
    return world


@pytest.mark.parametrize("policy", ["strict", "backfill"])
def test_a_full_cluster_without_declared_ends_walks_the_narrow_front(policy: str) -> None:
    """No timeouts: backfill has no reservation to promise, so, as strict, nobody overtakes
    the first task and the walk ends one task past it: in the narrow front, every pass."""
    world = _settled(policy, 0)
    for _ in range(4):
        assert _cycle(world) == [NARROW] * 3


@pytest.mark.parametrize(("policy", "timeout"), [("backfill", 50), ("besteffort", 0)])
def test_a_walk_that_tests_past_the_narrow_front_widens_it(policy: str, timeout: float) -> None:
    """Backfill with declared ends reserves the first task's start, and besteffort always, tests
    `backfill_candidates` tasks past it, beyond the narrow front: the wide front is walked, and
    kept while the walk needs it, with every pass equal to plan()."""
    world = _settled(policy, timeout)
    for _ in range(4):
        assert _cycle(world) == [NARROW + BOUND] * 3
