"""A busy single queue for the fast pass's tests: a full 4-CPU cluster and a queue of waiting
1-CPU tasks in three priorities, played through `History` (every pass checked against plan()
in every field), and the step that moves Ray's PENDING jobs to RUNNING."""

from __future__ import annotations

import dataclasses
from typing import Any

from specs.cluster import PENDING, RUNNING, SUCCEEDED, Capacity
from specs.settings.process import PlanOptions
from tests.support.incremental_history import History, assert_identical
from tests.support.planner_world import GIB


def busy_queue(
    policy: str,
    timeout: float,
    *,
    tasks: int,
    exact: int,
    inflight: int,
    candidates: int | None = None,
    tell_changed: bool = False,
) -> History:
    """`tasks` waiting 1-CPU tasks (each `timeout` seconds at most; 0: no timeout) on 4 CPUs."""
    bound = {} if candidates is None else {"backfill_candidates": candidates}
    options = PlanOptions(
        queue_id="q",
        policy=policy,
        exact_queue_positions=exact,
        max_inflight=inflight,
        **bound,
    )
    world = History(
        options,
        None,
        capacity=Capacity(4, 0, 64 * GIB),
        check=assert_identical,
        every_field=True,
        tell_changed=tell_changed,
    )
    for i in range(tasks):
        fields: dict[str, Any] = {"priority": i % 3, "cpu": 1}
        if timeout:
            fields["timeoutSeconds"] = timeout
        world.apply(("put", f"t{i:03d}", fields))
    return world


def start_all(world: History) -> None:
    """Ray starts every job it holds PENDING, now."""
    for sid, job in list(world.jobs.items()):
        if job.status == PENDING:
            world.jobs[sid] = dataclasses.replace(job, status=RUNNING, start_time=world.now)


def settle(world: History) -> None:
    """The first passes: the queue's first jobs submitted, listed, then running."""
    world.run_pass()
    world.run_pass()
    start_all(world)
    world.run_pass()
    world.run_pass()


def end_one(world: History) -> None:
    """A second later Ray's oldest job ends: the pass that sees it (the next task submitted),
    the one that sees the new job PENDING, and the one that sees it RUNNING."""
    world.apply(("tick", 1))
    world.apply(("ray", 0, SUCCEEDED, 0))
    world.run_pass()
    world.run_pass()
    start_all(world)
    world.run_pass()
