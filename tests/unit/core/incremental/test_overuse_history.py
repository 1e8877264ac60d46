"""The Overusing condition and `overuse: Stop` through the planner's one entry: every pass
of the history is planned by plan_incremental and by plan() alike (tests/support/
incremental_history.py checks that they agree), with the fast pass, the statuses read back
and the deadlines compared too."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.task.overuse import CONFIRM_SECONDS
from specs.cluster import RUNNING, STOPPED, SUCCEEDED
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.models import ConditionType, Phase, Reason
from tests.support.incremental_history import History, assert_identical

QUEUES = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {{cpu: 4}}
      overuse: {mode}
      overuseGraceSeconds: 20
"""


def reasons(world: History, name: str) -> list[str]:
    body = world.statuses[name].status
    return [c.reason for c in body.conditions if c.type == ConditionType.OVERUSING]


@pytest.mark.parametrize("mode", ["Charge", "Warn", "Stop"])
def test_both_planners_flag_and_stop_alike(mode: str) -> None:
    options = PlanOptions(queue_id="q", policy="backfill")
    world = History(options, parse_queue_config(QUEUES.format(mode=mode)), every_field=True)
    world.check = assert_identical
    world.apply(("put", "team-a/train", {"cpu": 1}))
    world.apply(("put", "team-a/next", {"cpu": 1, "priority": 0}))
    world.run_pass()
    world.apply(("ray", 0, RUNNING, 0))
    world.apply(("ray", 1, RUNNING, 0))
    world.run_pass()
    sid = world.statuses["team-a/train"].status.submission_id
    assert sid is not None
    world.held[sid] = world.capacity  # its driver took the whole cluster
    world.run_pass()
    assert world.statuses["team-a/train"].status.over_since is not None
    for _ in range(4):
        world.apply(("tick", CONFIRM_SECONDS / 4))
        world.run_pass()
    assert reasons(world, "team-a/train") == [Reason.OVERUSING]
    world.apply(("tick", 20))
    world.run_pass()
    body = world.statuses["team-a/train"].status
    if mode != "Stop":
        assert body.phase is Phase.RUNNING and reasons(world, "team-a/train") == [Reason.OVERUSING]
        return
    assert body.phase is Phase.QUEUED and body.preemptions == 1
    assert reasons(world, "team-a/train") == [Reason.OVERUSE_STOP]
    world.jobs[sid] = replace(world.jobs[sid], status=STOPPED)  # the old job has stopped
    del world.held[sid]
    world.apply(("tick", 1))
    world.run_pass()
    world.run_pass()
    assert world.statuses["team-a/train"].status.run == 2


EXAMPLES = int(os.environ.get("RAYQUEUE_PROPERTY_EXAMPLES", "200"))


@st.composite
def overuse_steps(draw: st.DrawFn) -> tuple[Any, ...]:
    """Runs that start, end and hold more or less than they declare while time passes."""
    kind = draw(st.sampled_from(["hold", "hold", "tick", "tick", "ray", "unhold", "put"]))
    if kind == "hold":
        return (kind, draw(st.integers(0, 3)), draw(st.sampled_from([0.5, 1, 1.2, 2, 6])))
    if kind == "tick":
        return (kind, draw(st.sampled_from([1, 5, 15, 20, 31])))
    if kind == "ray":
        outcome = draw(st.sampled_from([RUNNING, RUNNING, RUNNING, SUCCEEDED, STOPPED]))
        return (kind, draw(st.integers(0, 3)), outcome, 0)
    if kind == "unhold":
        return (kind, draw(st.integers(0, 3)))
    name = draw(st.sampled_from(["team-a/a", "team-a/b", "team-b/c"]))
    return (kind, name, {"cpu": draw(st.sampled_from([1, 2])), "priority": draw(st.integers(0, 2))})


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    modes=st.tuples(*[st.sampled_from(["Charge", "Warn", "Stop"])] * 2),
    grace=st.sampled_from([0, 20]),
    history=st.lists(overuse_steps(), min_size=1, max_size=40),
)
def test_the_entry_equals_the_full_plan_while_runs_hold_over(
    modes: tuple[str, str], grace: int, history: list[tuple[Any, ...]]
) -> None:
    config = (
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n"
        f"    - name: team-a\n      nominalQuota: {{cpu: 3}}\n      overuse: {modes[0]}\n"
        f"      overuseGraceSeconds: {grace}\n"
        f"    - name: team-b\n      nominalQuota: {{cpu: 1}}\n      overuse: {modes[1]}\n"
    )
    options = PlanOptions(queue_id="q", policy="backfill", lost_grace_seconds=5.0)
    world = History(options, parse_queue_config(config), every_field=True)
    world.check = assert_identical
    for name in ("team-a/a", "team-a/b", "team-b/c"):
        world.apply(("put", name, {"cpu": 1}))
    world.run_pass()
    for step in history:
        world.apply(step)
        world.run_pass()
        if step[0] == "tick":
            world.run_pass()
