"""The planner's part of a pass in which one job ends and the next task starts:
`plan_incremental` alone, pure, over N waiting 1-CPU tasks on 8 CPUs, with the statuses it
returns written back as the loop would (each write a new version). Reports the CPU of that
pass and of the pass after it (the written statuses coming back), medians of 9.

python -m benchmarks.planner_churn --sizes 10000 50000
python -m benchmarks.planner_churn --sizes 10000 --policy strict
python -m benchmarks.planner_churn --sizes 10000 --teams 4   (a _queues.yaml of 4 teams)
python -m benchmarks.planner_churn --sizes 10000 --teams 4 --max-queued 1000   (and maxQueued)
python -m benchmarks.planner_churn --sizes 10000 --preemption   (LowerPriority; with --teams,
    each team's withinQueue LowerPriority and reclaimWithinCohort Any)
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import save, table
from reconciler.app.runtime import tune_gc
from reconciler.core import incremental
from reconciler.core.planner import Observation, Plan, TaskInput
from specs.cluster import PENDING, RUNNING, SUCCEEDED, Capacity, RayJob
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.records import Task
from specs.task.status import TaskStatus

ROUNDS = 9
T0 = 1_767_225_600.0


def _task(priority: int) -> Task:
    return Task.model_validate(
        {
            "apiVersion": "rayqueue/v1",
            "kind": "Task",
            "metadata": {},
            "spec": {"entrypoint": "python job.py", "priority": priority, "resources": {"cpu": 1}},
        }
    )


class World:
    """Specs, statuses with their versions, and Ray's jobs, moved as the loop and Ray would."""

    def __init__(
        self, size: int, policy: str, teams: int = 0, max_queued: int = 0, preemption: bool = False
    ) -> None:
        self.options = PlanOptions(
            queue_id="bench", policy=policy, preemption="LowerPriority" if preemption else "Never"
        )
        self.queues = _teams(teams, max_queued, preemption)
        tasks = {p: _task(p) for p in range(10)}
        names = [f"t{i:05d}" if not teams else f"team-{i % teams}/t{i:05d}" for i in range(size)]
        self.specs = {
            name: TaskInput(name, tasks[i % 10], None, tasks[i % 10])
            for i, name in enumerate(names)
        }
        self.statuses: dict[str, TaskStatus] = {}
        self.generation: dict[str, int] = {}
        self.jobs: dict[str, RayJob] = {}
        self.counter = itertools.count(1)
        self.memo = incremental.EMPTY
        self.now = T0

    def run_pass(self) -> tuple[Plan, float]:
        versions = {n: self.generation.get(n, 0) for n in self.specs}
        observed = Observation(dict(self.jobs), Capacity(8, 0, 2**40))
        at = datetime.fromtimestamp(self.now, UTC)
        cpu = time.process_time()
        plan, self.memo = incremental.plan_incremental(
            self.memo,
            self.specs,
            self.statuses,
            observed,
            at,
            self.options,
            queues=self.queues,
            versions=versions,
        )
        spent = time.process_time() - cpu
        self.statuses = dict(self.statuses)
        for name, status in plan.statuses.items():
            if self.statuses.get(name) is not status:
                self.statuses[name] = status
                self.generation[name] = next(self.counter)
        for submit in plan.submits:
            sid = submit.request.submission_id
            meta = dict(submit.request.metadata)
            self.jobs[sid] = RayJob(sid, PENDING, start_time=self.now, metadata=meta)
        return plan, spent

    def move(self, status: str) -> None:
        live = sorted(s for s, job in self.jobs.items() if not job.terminal)
        if status == SUCCEEDED:
            job = self.jobs[live[0]]
            self.jobs[live[0]] = replace(job, status=SUCCEEDED, end_time=self.now, exit_code=0)
        else:
            for sid in live:
                self.jobs[sid] = replace(self.jobs[sid], status=RUNNING)


def _teams(count: int, max_queued: int = 0, preemption: bool = False) -> QueueConfig | None:
    """A _queues.yaml of `count` teams sharing the 8 CPUs equally (None: no team queues), each
    with `max_queued` as its maxQueued (0: none), and preempting within itself and by reclaim
    if `preemption`."""
    if not count:
        return None
    lines = ["apiVersion: rayqueue/v1", "kind: QueueConfig", "spec:", "  queues:"]
    for k in range(count):
        lines += [f"    - name: team-{k}", f"      nominalQuota: {{cpu: {8 / count:g}}}"]
        if max_queued:
            lines.append(f"      maxQueued: {max_queued}")
        if preemption:
            lines.append("      preemption: {withinQueue: LowerPriority, reclaimWithinCohort: Any}")
    return parse_queue_config("\n".join(lines) + "\n")


def measure(
    size: int, policy: str, teams: int = 0, max_queued: int = 0, preemption: bool = False
) -> dict[str, Any]:
    world = World(size, policy, teams, max_queued, preemption)
    for _ in range(3):
        world.run_pass()
    world.move(RUNNING)
    for _ in range(2):
        world.run_pass()
    tune_gc()  # as serve's daemon does, once the first passes built the long-lived state
    ends, after = [], []
    for _ in range(ROUNDS):
        world.now += 1
        world.move(SUCCEEDED)
        plan, spent = world.run_pass()
        assert len(plan.submits) == 1, plan.submits
        ends.append(spent * 1000)
        after.append(world.run_pass()[1] * 1000)
        world.move(RUNNING)
        world.run_pass()
    ends.sort()
    after.sort()
    return {
        "specs": size,
        "policy": policy,
        "teams": teams,
        "max_queued": max_queued,
        "preemption": preemption,
        "end_pass_planner_cpu_ms_median": ends[ROUNDS // 2],
        "end_pass_planner_cpu_ms_min": ends[0],
        "next_pass_planner_cpu_ms_median": after[ROUNDS // 2],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000])
    parser.add_argument("--policy", default="backfill", choices=("strict", "backfill"))
    parser.add_argument("--teams", type=int, default=0, help="team queues (0: none)")
    parser.add_argument("--max-queued", type=int, default=0, help="each team's maxQueued")
    parser.add_argument("--preemption", action="store_true", help="preemption on (LowerPriority)")
    parser.add_argument("--out", type=Path, default=None, help="JSON result file")
    args = parser.parse_args(argv)
    rows = []
    for size in args.sizes:
        rows.append(measure(size, args.policy, args.teams, args.max_queued, args.preemption))
        print(rows[-1], flush=True)
    header = list(rows[0])
    print(table("the planner's part of a pass", header, [[r[h] for h in header] for r in rows]))
    print(f"results: {save('planner_churn', {'rows': rows}, args.out)}")


if __name__ == "__main__":
    main()
