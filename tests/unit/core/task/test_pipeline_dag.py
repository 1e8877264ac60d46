"""A 50-task random DAG through the real planner and the fake Ray, on a virtual clock.

Some tasks fail once and are retried, some always fail; dependents of the ones that always
fail wait for `Failed` or `Finished`, so every task can end. Checked on every submission: no
task starts before its dependencies' latest runs have ended the way it asks for. At the end:
every task has ended, as its fate says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.core.planner import Observation, PlanOptions, TaskInput, plan
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import FAILED, META_RUN, META_TASK, RUNNING, SUCCEEDED, Capacity, RayJob
from specs.task.models import FINISHED, Phase
from specs.task.records import Task
from specs.task.status import TaskStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)
N = 50
FLAKY, DOOMED, FINE = "flaky", "doomed", "fine"


@dataclass(frozen=True)
class Node:
    name: str
    fate: str  # FLAKY: fails its first run; DOOMED: fails every run; FINE: succeeds
    duration: int  # seconds each run takes once running
    deps: tuple[tuple[str, str], ...]  # (name, condition)


def random_dag(seed: int) -> dict[str, Node]:
    rng = random.Random(seed)
    nodes: dict[str, Node] = {}
    for i in range(N):
        fate = rng.choices([FINE, FLAKY, DOOMED], [0.6, 0.3, 0.1])[0]
        deps = []
        for j in rng.sample(range(i), k=min(i, rng.randint(0, 3))):
            dep = nodes[f"t{j:02d}"]
            # Only conditions that can be met, so that every task ends.
            choices = ["Failed", "Finished"] if dep.fate == DOOMED else ["Succeeded", "Finished"]
            deps.append((dep.name, rng.choice(choices)))
        nodes[f"t{i:02d}"] = Node(f"t{i:02d}", fate, rng.randint(1, 6), tuple(deps))
    # Shuffled names: the planner must not rely on dependencies sorting first.
    order = list(nodes.values())
    rng.shuffle(order)
    return {node.name: node for node in order}


def to_task(node: Node) -> Task:
    spec: dict[str, object] = {
        "entrypoint": f"run {node.name}",
        "resources": {"cpu": 1},
        "retry": {"limit": 1, "backoffSeconds": 2},
    }
    if node.deps:
        spec["dependsOn"] = [{"name": n, "condition": c} for n, c in node.deps]
    return Task.model_validate({"apiVersion": "rayqueue/v1", "kind": "Task", "spec": spec})


def latest_job(ray: FakeRay, name: str) -> RayJob | None:
    runs = [j for j in ray.jobs.values() if j.metadata.get(META_TASK) == name]
    return max(runs, key=lambda j: int(j.metadata[META_RUN]), default=None)


def meets(job: RayJob | None, condition: str, now: float) -> bool:
    if job is None or not job.terminal or job.end_time is None or job.end_time > now:
        return False
    return {
        "Succeeded": job.status == SUCCEEDED,
        "Failed": job.status != SUCCEEDED,
        "Finished": True,
    }[condition]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_dag_respects_dependencies_and_every_task_ends(seed: int) -> None:
    nodes = random_dag(seed)
    now = T0
    ray = FakeRay(Capacity(6, 0, 2**40), clock=lambda: now.timestamp())
    specs = {name: TaskInput(name, to_task(node)) for name, node in nodes.items()}
    statuses: dict[str, TaskStatus] = {}
    running_since: dict[str, float] = {}
    submits = 0
    for _ in range(3000):
        t = now.timestamp()
        p = plan(specs, statuses, Observation({j.submission_id: j for j in ray.list_jobs()},
                                               ray.capacity()), now, PlanOptions())  # fmt: skip
        statuses.update(p.statuses)
        for submit in p.submits:
            node = nodes[submit.task]
            for dep, condition in node.deps:
                assert meets(latest_job(ray, dep), condition, t), (
                    f"{node.name} started at {t} before {dep} met {condition}"
                )
                # ... and no new run of the dependency is on its way (a retry, say).
                assert p.statuses[dep].status.phase in FINISHED
            ray.submit(submit.request)
            submits += 1
        for stop in p.stops:
            ray.stop(stop.submission_id)
        # Ray's side: pending jobs start, running ones end after their duration.
        for sid, job in list(ray.jobs.items()):
            node = nodes[job.metadata[META_TASK]]
            if job.status == "PENDING":
                ray.set_status(sid, RUNNING)
                running_since[sid] = t
            elif job.status == RUNNING and t - running_since[sid] >= node.duration:
                first = job.metadata[META_RUN] == "1"
                fails = node.fate == DOOMED or (node.fate == FLAKY and first)
                ray.set_status(sid, FAILED if fails else SUCCEEDED)
        if all(s.status.phase in FINISHED for s in statuses.values()) and len(statuses) == N:
            break
        now += timedelta(seconds=1)
    unfinished = {n: (s.status.phase, s.status.reason) for n, s in statuses.items()
                  if s.status.phase not in FINISHED}  # fmt: skip
    assert unfinished == {}
    for name, node in nodes.items():
        body = statuses[name].status
        if node.fate == DOOMED:
            assert (body.phase, body.reason, body.run) == (Phase.FAILED, "BackoffLimitExceeded", 2)
            assert body.exit_code == 1
        else:
            assert body.phase is Phase.SUCCEEDED and body.exit_code == 0
            assert body.run == (2 if node.fate == FLAKY else 1)
    assert submits == sum(2 if n.fate in (FLAKY, DOOMED) else 1 for n in nodes.values())
