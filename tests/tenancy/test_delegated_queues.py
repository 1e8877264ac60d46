"""Delegation bounded by the parent: a team's own `_queues.yaml` divides what the top file
grants its queue, and must never widen it. A team whose queue the top file gives no
preemption must not preempt another team's runs through a sub-queue of its own file that
says `reclaimWithinCohort: Any`. Read as serve reads the tree, planned by the pure planner."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from reconciler.core.planner import Plan
from specs.cluster import Capacity
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.queues.tree import divide_tree
from specs.settings.process import PlanOptions
from specs.task.models import Phase
from tests.support.planner_world import GIB, Cluster, task

ROOT = Path("/tasks")
# The cluster admin's file: two teams of 4 CPUs, and no preemption for either.
TOP = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 4}
    - name: team-b
      nominalQuota: {cpu: 4}
"""
# team-a's own file, which a team-a admin token (or a commit into team-a/) writes.
TEAM_A_OWN = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a/x
      nominalQuota: {cpu: 4}
      preemption: {reclaimWithinCohort: Any, withinQueue: LowerPriority}
"""


def _tree(team_a_own: str | None) -> QueueConfig:
    files = {ROOT / "team-a" / "_queues.yaml": team_a_own}

    def read(path: Path) -> bytes | None:
        text = files.get(path)
        return text.encode() if text is not None else None

    return divide_tree(parse_queue_config(TOP), ROOT, read=read)


def _team_b_borrows_everything(queues: QueueConfig) -> Cluster:
    """team-b's eight 1-CPU runs fill the idle 8-CPU cluster, borrowing all of team-a's quota."""
    runs = {f"team-b/b{i}": task(0, 1) for i in range(8)}
    world = Cluster(
        dict(runs),
        capacity=Capacity(8, 0, 64 * GIB),
        options=PlanOptions(policy="backfill"),
        queues=queues,
    )
    world.step()
    world.run_all()
    assert all(world.phase(name) is Phase.RUNNING for name in runs)
    world.now += timedelta(seconds=600)
    return world


def _victims(plan: Plan) -> list[str]:
    return sorted(v for decision in plan.preemptions for v in decision.victims)


def test_without_its_own_file_team_a_preempts_nobody() -> None:
    """The top file's answer, which team-a's own file must not change."""
    world = _team_b_borrows_everything(_tree(None))
    world.specs["team-a/x/job"] = task(5, 2)
    assert _victims(world.step()) == []


def test_a_teams_own_file_does_not_grant_it_cross_team_preemption() -> None:
    world = _team_b_borrows_everything(_tree(TEAM_A_OWN))
    world.specs["team-a/x/job"] = task(5, 2)
    victims = _victims(world.step())
    assert not [v for v in victims if v.startswith("team-b/")], victims
