"""Issue 27 against issue 30's eighth pass: with team queues and a full cluster, the
least-served queue's own walk past its blocked head (`fairshare._own_first`) must not make the
fast pass grow that queue's head and walk the queues again and again. Its tests are handed over
(`FairAdmission.unread`) and run on the tasks past the head; the plan is the full planner's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from benchmarks.planner_churn import World
from reconciler.core import headadmission, planner
from reconciler.core.planner import Observation
from specs.cluster import RUNNING, SUCCEEDED, Capacity


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of candidates each walk over the queues' heads was given, this pass."""
    sizes: list[int] = []
    walk: Callable[..., Any] = headadmission.walk_queues

    def counted(ctx: Any, prefix: list[Any], cut: Any) -> Any:
        sizes.append(len(prefix))
        return walk(ctx, prefix, cut)

    monkeypatch.setattr(headadmission, "walk_queues", counted)
    return sizes


def _full(world: World) -> planner.Plan:
    observed = Observation(dict(world.jobs), Capacity(8, 0, 2**40))
    at = datetime.fromtimestamp(world.now, UTC)
    return planner.plan(
        world.specs, world.statuses, observed, at, world.options, queues=world.queues
    )


def test_a_full_cluster_team_pass_walks_the_heads_once(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(2000, "backfill", teams=4)
    for _ in range(3):
        world.run_pass()
    world.move(RUNNING)
    for _ in range(2):
        world.run_pass()
    sizes = _walks(monkeypatch)
    for _ in range(3):
        world.now += 1
        world.move(SUCCEEDED)  # one job ends: one task starts, and the cluster is full again
        expected = _full(world)
        del sizes[:]
        plan, _ = world.run_pass()
        assert len(plan.submits) == 1
        assert plan.statuses == expected.statuses
        assert plan.submits == expected.submits
        # One walk, over the heads first given (8 a queue): before, the least-served queue's
        # head was grown 8 -> 32 -> 128 -> 512, each time walking every queue again.
        assert len(sizes) == 1, sizes
        assert sizes[0] <= 4 * 8 + 4, sizes
        del sizes[:]
        world.run_pass()  # the written statuses come back
        assert len(sizes) <= 1, sizes
        world.move(RUNNING)
        world.run_pass()
