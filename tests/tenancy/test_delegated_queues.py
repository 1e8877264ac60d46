"""Delegation bounded by the parent: a team's own `_queues.yaml` divides what the top file
grants its queue, and must never widen it. A team whose queue the top file gives no
preemption must not preempt another team's runs through a sub-queue of its own file that
says `reclaimWithinCohort: Any`. Read as serve reads the tree, planned by the pure planner."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient

from reconciler.core.planner import Plan
from specs.cluster import Capacity
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.queues.tree import divide_tree
from specs.settings.process import PlanOptions
from specs.task.models import Phase
from tests.api.conftest import task_json
from tests.support.planner_world import GIB, Cluster, task
from tests.support.world import World
from tests.tenancy.conftest import auth

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


def _tree(team_a_own: str | None, top: str = TOP) -> QueueConfig:
    files = {ROOT / "team-a" / "_queues.yaml": team_a_own}

    def read(path: Path) -> bytes | None:
        text = files.get(path)
        return text.encode() if text is not None else None

    return divide_tree(parse_queue_config(top), ROOT, read=read)


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


def _started_by_team(queues: QueueConfig, waiting: dict[str, int]) -> dict[str, int]:
    """How many 1-CPU tasks of each team's folder start on an idle 8-CPU cluster."""
    specs = {f"{folder}/t{i}": task(0, 1) for folder, n in waiting.items() for i in range(n)}
    world = Cluster(
        dict(specs),
        capacity=Capacity(8, 0, 64 * GIB),
        options=PlanOptions(policy="backfill"),
        queues=queues,
    )
    world.step()
    started = [name for name in specs if world.phase(name) is not Phase.QUEUED]
    return {team: sum(n.startswith(team + "/") for n in started) for team in ("team-a", "team-b")}


def test_a_sub_queues_weight_is_weighed_only_against_its_siblings() -> None:
    """Weights are left as a team's file writes them: they divide the team, not the cluster."""
    pure = TOP.replace("{cpu: 4}", "{cpu: 0}")  # pure sharing: every start is by weight
    heavy = TEAM_A_OWN.replace("{cpu: 4}", "{cpu: 0}").replace("preemption", "weight: 1000\n#")
    waiting = {"team-a/x": 8, "team-b": 8}
    assert _started_by_team(_tree(heavy, pure), waiting) == {"team-a": 4, "team-b": 4}
    assert _started_by_team(_tree(None, pure), {"team-a": 8, "team-b": 8}) == {
        "team-a": 4,
        "team-b": 4,
    }


def test_a_sub_queues_lending_limit_keeps_nothing_from_another_team() -> None:
    """What team-a lends to team-b is team-a's idle quota, whatever its sub-queues lend."""
    hoard = TEAM_A_OWN.replace("preemption", "lendingLimit: {cpu: 0}\n#")
    assert _started_by_team(_tree(hoard), {"team-b": 8}) == {"team-a": 0, "team-b": 8}


# The top file of the API test: the 4-CPU fake cluster split in two, no preemption for either.
TOP_API = TOP.replace("{cpu: 4}", "{cpu: 2}")


def test_a_team_admins_put_of_its_queue_file_does_not_grant_cross_team_preemption(
    teams: tuple[World, TestClient], tasks_dir: Path
) -> None:
    world, api = teams
    (tasks_dir / "_queues.yaml").write_text(TOP_API)  # the cluster admin's
    for i in range(4):  # team-b borrows all of team-a's idle quota
        put = api.put(f"/tasks/team-b/b{i}", json=task_json("sleep 600"), headers=auth("team-b"))
        assert put.status_code == 201, put.text
    world.step()
    assert len(world.our_jobs()) == 4
    for job in world.our_jobs():
        world.ray.set_status(job.submission_id, "RUNNING")
    world.clock.advance(600)
    world.step()
    own = TEAM_A_OWN.replace("{cpu: 4}", "{cpu: 2}").encode()
    put = api.put("/config/team-a/_queues.yaml", content=own, headers=auth("team-a-admin"))
    assert put.status_code == 201, put.text  # valid: what it asks beyond team-a's is bounded
    assert sorted(put.json()["warnings"]) == [
        "team-a/_queues.yaml:7:41: spec.queues[0].preemption.reclaimWithinCohort: Any goes "
        "beyond what its parent grants (team-a has reclaimWithinCohort Never); in force: Never",
        "team-a/_queues.yaml:7:59: spec.queues[0].preemption.withinQueue: LowerPriority goes "
        "beyond what its parent grants (team-a has withinQueue Never); in force: Never",
    ]
    job = task_json("sleep 1", cpu=2, priority=5)
    assert api.put("/tasks/team-a/x/job", json=job, headers=auth("team-a")).status_code == 201
    for _ in range(3):
        world.clock.advance(5)
        world.step()
    assert sorted(j.status for j in world.our_jobs()) == ["RUNNING"] * 4  # none stopped
    assert all(world.status(f"team-b/b{i}")["phase"] == "Running" for i in range(4))
    assert world.status("team-a/x/job")["phase"] == "Queued"
    items = api.get("/queues", headers=auth("platform")).json()["items"]
    mine = next(q for q in items if q["name"] == "team-a/x")
    assert mine["effective"]["preemption"]["reclaimWithinCohort"] == "Never"
    assert mine["effective"]["preemption"]["withinQueue"] == "Never"
    fields = {b["field"]: b for b in mine["effective"]["bounded"]}
    assert set(fields) == {"preemption.reclaimWithinCohort", "preemption.withinQueue"}
    message = fields["preemption.reclaimWithinCohort"]["message"]
    assert message.startswith("team-a/_queues.yaml:7:")
    assert "team-a has reclaimWithinCohort Never" in message
