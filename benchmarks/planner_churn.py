"""The planner's part of a pass in which one job ends and the next task starts:
`plan_incremental` alone, pure, over N waiting 1-CPU tasks on 8 CPUs, with the statuses it
returns written back as the loop would (each write a new version). Reports the CPU of that
pass and of the pass after it (the written statuses coming back), medians of 9.

python -m benchmarks.planner_churn --sizes 10000 50000
python -m benchmarks.planner_churn --sizes 10000 --policy strict
python -m benchmarks.planner_churn --sizes 10000 --teams 4   (a _queues.yaml of 4 teams)
python -m benchmarks.planner_churn --sizes 10000 --teams 4 --max-queued 1000   (and maxQueued)
python -m benchmarks.planner_churn --sizes 10000 --depends 0.1   (a tenth wait for another task)
python -m benchmarks.planner_churn --sizes 10000 --explicit-ids 0.5   (half with spec.submissionId)
python -m benchmarks.planner_churn --sizes 10000 --arrays 10   (10 task arrays of 1000 elements)
python -m benchmarks.planner_churn --sizes 10000 --arrays 10 --max-parallel 2   (each capped)
python -m benchmarks.planner_churn --sizes 10000 --scaling   (an autoscaler that can add nodes)
python -m benchmarks.planner_churn --sizes 10000 --preemption   (LowerPriority; with --teams,
    each team's withinQueue LowerPriority and reclaimWithinCohort Any)
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import save, table
from reconciler.app.runtime import tune_gc
from reconciler.core import incremental
from reconciler.core.planner import Observation, Plan, TaskInput
from specs.cluster import PENDING, RUNNING, SUCCEEDED, Capacity, NodeType, RayJob, Scaling
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.arrays import expand
from specs.task.records import Task
from specs.task.status import TaskStatus

ROUNDS = 9
T0 = 1_767_225_600.0
CAPACITY = Capacity(8, 0, 2**40)
# The autoscaler's report with --scaling: up to four more 8-CPU nodes, one being launched. The
# cluster never grows here, so the queue's front keeps waiting for them.
WORKER = NodeType("worker", CAPACITY, 4)
SCALING = Scaling(CAPACITY + Capacity(32, 0, 2**42), (WORKER,), "autoscaler", ("worker",))


@dataclass(frozen=True)
class Shape:
    """What the specs use besides one plain queue (every field off by default)."""

    teams: int = 0  # team queues (0: none)
    max_queued: int = 0  # each team's maxQueued (0: none)
    depends: float = 0  # the fraction of tasks that wait for another
    explicit_ids: float = 0  # the fraction of tasks with a spec.submissionId of their own
    arrays: int = 0  # task arrays of equal size making up the specs (0: plain tasks)
    max_parallel: int = 0  # each array's maxParallel (0: none)
    scaling: bool = False  # an autoscaler that can add nodes (SCALING)
    preemption: bool = False  # preemption on: LowerPriority, and in each team's queue


def _task(
    priority: int,
    depends_on: str | None = None,
    submission_id: str | None = None,
    array: dict[str, int] | None = None,
) -> Task:
    spec: dict[str, Any] = {
        "entrypoint": "python job.py",
        "priority": priority,
        "resources": {"cpu": 1},
    }
    if depends_on is not None:
        spec["dependsOn"] = [{"name": depends_on}]
    if submission_id is not None:
        spec["submissionId"] = submission_id
    if array is not None:
        spec["array"] = array
    return Task.model_validate(
        {"apiVersion": "rayqueue/v1", "kind": "Task", "metadata": {}, "spec": spec}
    )


class World:
    """Specs, statuses with their versions, and Ray's jobs, moved as the loop and Ray would."""

    def __init__(self, size: int, policy: str, shape: Shape = Shape()) -> None:
        preemption = "LowerPriority" if shape.preemption else "Never"
        self.options = PlanOptions(queue_id="bench", policy=policy, preemption=preemption)
        teams = shape.teams
        self.queues = _teams(teams, shape.max_queued, shape.preemption)
        self.scaling = SCALING if shape.scaling else None
        tasks = {p: _task(p) for p in range(10)}
        names = [f"t{i:05d}" if not teams else f"team-{i % teams}/t{i:05d}" for i in range(size)]
        self.specs: dict[str, TaskInput] = {}
        for i, name in enumerate(names if not shape.arrays else ()):
            # `depends` of the tasks, spread evenly, each waits for the task before it (one
            # priority lower: with a tenth, each job that ends lets its dependent start next),
            # named from the top, whatever the dependent's folder; `explicit_ids` of them,
            # spread evenly, each with an id of its own.
            waits = bool(i) and _picked(i, shape.depends)
            named = _picked(i, shape.explicit_ids)
            if waits or named:
                task = _task(
                    i % 10,
                    "/" + names[i - 1] if waits else None,
                    f"job-{i:05d}" if named else None,
                )
            else:
                task = tasks[i % 10]
            self.specs[name] = TaskInput(name, task, None, task)
        if shape.arrays:
            self.specs = _arrays(size, teams, shape.arrays, shape.max_parallel)
        self.statuses: dict[str, TaskStatus] = {}
        self.generation: dict[str, int] = {}
        self.jobs: dict[str, RayJob] = {}
        self.counter = itertools.count(1)
        self.memo = incremental.EMPTY
        self.now = T0

    def run_pass(self) -> tuple[Plan, float]:
        versions = {n: self.generation.get(n, 0) for n in self.specs}
        observed = Observation(dict(self.jobs), CAPACITY, scaling=self.scaling)
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


def _arrays(size: int, teams: int, count: int, max_parallel: int) -> dict[str, TaskInput]:
    """`count` task arrays of equal size (`size` elements in all), as the store expands them,
    each of one priority, each element with `max_parallel` as its maxParallel (0: none)."""
    specs: dict[str, TaskInput] = {}
    for k in range(count):
        array: dict[str, int] = {"count": size // count}
        if max_parallel:
            array["maxParallel"] = max_parallel
        name = f"a{k:03d}" if not teams else f"team-{k % teams}/a{k:03d}"
        for element, task in expand(name, _task(k % 10, array=array)).items():
            specs[element] = TaskInput(element, task, None, task)
    return specs


def _picked(i: int, fraction: float) -> bool:
    """Whether the i-th task is one of `fraction` of them, spread evenly."""
    return int((i + 1) * fraction) > int(i * fraction)


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


def measure(size: int, policy: str, shape: Shape = Shape()) -> dict[str, Any]:
    world = World(size, policy, shape)
    for _ in range(3):
        world.run_pass()
    world.move(RUNNING)
    for _ in range(2):
        world.run_pass()
    tune_gc()  # as serve's daemon does, once the first passes built the long-lived state
    ends, after = [], []
    fast = 0  # of the passes in which a job ended, those the fast pass took
    for _ in range(ROUNDS):
        world.now += 1
        world.move(SUCCEEDED)
        plan, spent = world.run_pass()
        assert len(plan.submits) == 1, plan.submits
        fast += world.memo.fast
        ends.append(spent * 1000)
        after.append(world.run_pass()[1] * 1000)
        world.move(RUNNING)
        world.run_pass()
    ends.sort()
    after.sort()
    return {
        "specs": size,
        "policy": policy,
        **asdict(shape),
        "end_pass_planner_cpu_ms_median": ends[ROUNDS // 2],
        "end_pass_planner_cpu_ms_min": ends[0],
        "next_pass_planner_cpu_ms_median": after[ROUNDS // 2],
        "end_passes_fast": fast,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000])
    parser.add_argument("--policy", default="backfill", choices=("strict", "backfill"))
    parser.add_argument("--teams", type=int, default=0, help="team queues (0: none)")
    parser.add_argument("--max-queued", type=int, default=0, help="each team's maxQueued")
    parser.add_argument(
        "--depends", type=float, default=0, help="the fraction of tasks that wait for another"
    )
    parser.add_argument(
        "--explicit-ids",
        type=float,
        default=0,
        metavar="FRACTION",
        help="the fraction of tasks with an explicit spec.submissionId, each its own",
    )
    parser.add_argument(
        "--arrays", type=int, default=0, help="task arrays of equal size making up the specs"
    )
    parser.add_argument("--max-parallel", type=int, default=0, help="each array's maxParallel")
    parser.add_argument(
        "--scaling", action="store_true", help="an autoscaler report with node types to add"
    )
    parser.add_argument("--preemption", action="store_true", help="preemption on (LowerPriority)")
    parser.add_argument("--out", type=Path, default=None, help="JSON result file")
    args = parser.parse_args(argv)
    rows = []
    for size in args.sizes:
        shape = Shape(
            args.teams,
            args.max_queued,
            args.depends,
            args.explicit_ids,
            args.arrays,
            args.max_parallel,
            args.scaling,
            args.preemption,
        )
        rows.append(measure(size, args.policy, shape))
        print(rows[-1], flush=True)
    header = list(rows[0])
    print(table("the planner's part of a pass", header, [[r[h] for h in header] for r in rows]))
    print(f"results: {save('planner_churn', {'rows': rows}, args.out)}")


if __name__ == "__main__":
    main()
