"""The Overusing condition and `overuse: Stop` through the planner's one entry: every pass
of the history is planned by plan_incremental and by plan() alike (tests/support/
incremental_history.py checks that they agree), with the fast pass, the statuses read back
and the deadlines compared too."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.core.task.overuse import CONFIRM_SECONDS
from specs.cluster import RUNNING, STOPPED
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
