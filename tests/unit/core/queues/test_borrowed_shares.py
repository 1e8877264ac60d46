"""Fair share on what is borrowed, over whole passes of the planner: queues that borrow the same
idle capacity split it by weight, and a queue's own nominal quota does not count against it."""

from __future__ import annotations

import pytest

from specs.cluster import Capacity
from specs.queues.parse import parse_queue_config
from specs.task.models import Phase
from tests.support.planner_world import GIB, PlanWorld, task


def config(a: tuple[int, int], b: tuple[int, int], lender: int) -> str:
    """team-a and team-b as (nominal CPU, weight); `lender` holds the idle quota."""
    return f"""\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - {{name: team-a, nominalQuota: {{cpu: {a[0]}}}, weight: {a[1]}}}
    - {{name: team-b, nominalQuota: {{cpu: {b[0]}}}, weight: {b[1]}}}
    - {{name: lender, nominalQuota: {{cpu: {lender}}}}}
"""


def fill(a: tuple[int, int], b: tuple[int, int], lender: int) -> dict[str, int]:
    """Both teams flood 1-CPU tasks; run passes until nothing more starts. CPUs held by team."""
    cpus = a[0] + b[0] + lender  # the listed quotas are the whole cluster: default has none
    specs = {f"{team}/t{i}": task(0, 1) for team in ("team-a", "team-b") for i in range(cpus)}
    w = PlanWorld(
        specs=dict(specs),
        capacity=Capacity(cpus, 0, 16 * GIB),
        queues=parse_queue_config(config(a, b, lender)),
    )
    for _ in range(cpus + 2):
        if not w.step().submits and w.statuses:
            break
    held = {"team-a": 0, "team-b": 0}
    for name in specs:
        if w.phase(name) is Phase.STARTING:
            held[name.split("/")[0]] += 1
    assert sum(held.values()) == cpus  # the idle capacity is used
    return held


@pytest.mark.parametrize(
    ("a", "b", "lender"),
    [
        ((0, 1), (0, 3), 16),  # every start is a borrow
        ((4, 1), (0, 3), 12),  # team-a has a nominal quota of its own besides
    ],
)
def test_weights_1_to_3_split_what_is_borrowed_1_to_3(
    a: tuple[int, int], b: tuple[int, int], lender: int
) -> None:
    held = fill(a, b, lender)
    borrowed_a, borrowed_b = held["team-a"] - a[0], held["team-b"] - b[0]
    assert borrowed_a + borrowed_b == lender
    assert abs(borrowed_a - lender / 4) <= 1 and abs(borrowed_b - 3 * lender / 4) <= 1


def test_a_team_with_a_bigger_nominal_quota_borrows_as_much() -> None:
    # Equal weights: the lender's 8 idle CPUs are split evenly, whatever each team's own quota.
    held = fill((2, 1), (6, 1), 8)
    assert held == {"team-a": 2 + 4, "team-b": 6 + 4}


def test_among_queues_within_nominal_the_least_served_starts_first() -> None:
    """Within nominal every share is 0: the queue that has used less of its own guarantee goes
    first, whatever the names (team-a sorts first, but it already uses half of its quota)."""
    w = PlanWorld(
        specs={"team-a/run": task(0, 2)},
        capacity=Capacity(4, 0, 16 * GIB),
        queues=parse_queue_config(config((4, 1), (4, 1), 0)),
    )
    w.step()
    w.ray("team-a/run", "RUNNING")
    w.step()
    w.specs["team-a/next"] = task(0, 2)
    w.specs["team-b/next"] = task(0, 2)  # 2 CPUs free: room for one of them
    p = w.step()
    assert [s.task for s in p.submits] == ["team-b/next"]
