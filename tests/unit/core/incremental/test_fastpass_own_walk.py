"""The fast pass and the least-served queue's own walk: with team queues and a full cluster, the
least-served queue's own walk past its blocked head (`fairshare._own_first`) must not make the
fast pass grow that queue's head and walk the queues again and again. Its tests are handed over
(`FairAdmission.unread`) and run on the tasks past the head; the plan is the full planner's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from benchmarks.planner_churn import Shape, World
from reconciler.core import planner
from reconciler.core.incremental import frontadmission
from reconciler.core.planner import Observation
from specs.cluster import RUNNING, SUCCEEDED, Capacity
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from tests.support.busy_queue import start_all
from tests.support.incremental_history import History
from tests.support.planner_world import GIB


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of candidates each walk over the queues' heads was given, this pass."""
    sizes: list[int] = []
    walk: Callable[..., Any] = frontadmission.walk_queues

    def counted(ctx: Any, prefix: list[Any], cut: Any) -> Any:
        sizes.append(len(prefix))
        return walk(ctx, prefix, cut)

    monkeypatch.setattr(frontadmission, "walk_queues", counted)
    return sizes


def _full(world: World) -> planner.Plan:
    observed = Observation(dict(world.jobs), Capacity(8, 0, 2**40))
    at = datetime.fromtimestamp(world.now, UTC)
    return planner.plan(
        world.specs, world.statuses, observed, at, world.options, queues=world.queues
    )


def test_a_full_cluster_team_pass_walks_the_heads_once(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(2000, "backfill", Shape(teams=4))
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


PURE = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
    - name: team-b
"""


@pytest.mark.parametrize("ends_before", [False, True])
def test_the_hold_decides_whether_the_own_walk_reads_past_the_given_head(
    monkeypatch: pytest.MonkeyPatch, ends_before: bool
) -> None:
    # Pure sharing on 8 CPUs: team-b runs 6 (they end by t+100), team-a (the least served)
    # waits with an 8-CPU head and 30 later 1-CPU tasks that run 1000 s: each would push the
    # head's start (t+100) back, so none starts, and the fast pass, given a head of a few,
    # must not grow it to read them all (`OwnTest.passes` holds the hold). Its 31st, if it
    # ends (by its 10 s timeout) before that start, starts: the fast pass reads that far.
    history = History(
        PlanOptions(queue_id="q", policy="backfill"),
        parse_queue_config(PURE),
        capacity=Capacity(8, 0, 64 * GIB),
        every_field=True,
    )
    for i in range(6):
        history.apply(("put", f"team-b/b{i}", {"cpu": 1, "timeoutSeconds": 100}))
    history.run_pass()
    start_all(history)
    history.run_pass()
    history.apply(("tick", 1))
    history.apply(("put", "team-a/a00", {"cpu": 8}))
    for i in range(1, 31):
        history.apply(("put", f"team-a/a{i:02d}", {"cpu": 1, "timeoutSeconds": 1000}))
    last = {"cpu": 1, "timeoutSeconds": 10 if ends_before else 1000}
    history.apply(("put", "team-a/a31", last))
    sizes = _walks(monkeypatch)
    plan = history.run_pass()  # compared with plan() by History
    assert history.memo.fast
    assert [s.task for s in plan.submits] == (["team-a/a31"] if ends_before else [])
    if ends_before:
        assert len(sizes) > 1, sizes  # it read past the head it was first given
    else:
        assert len(sizes) == 1, sizes
