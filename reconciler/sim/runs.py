"""The runs of python -m reconciler.sim: the workloads, one policy's run (with teams or not), and
the --autoscale comparison."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace

from reconciler.sim import autoscale, owed
from reconciler.sim import teams as team_split
from reconciler.sim.engine import MEMORY_BYTES, simulate
from reconciler.sim.metrics import Metrics, measure
from reconciler.sim.nodes import NodeModel
from reconciler.sim.report import duration
from reconciler.sim.widewaits import wide_waits
from reconciler.sim.workload import (
    SYNTHETIC_LOAD,
    WIDE_LOAD,
    Job,
    offered_load,
    read_swf,
    synthetic,
    wide,
)
from specs.queues.config import DEFAULT_HALF_LIFE, PreemptionConfig, QueueConfig
from specs.settings.process import PlanOptions


@dataclass(frozen=True)
class Teams:
    count: int
    weights: tuple[float, ...]
    idle_until: float | None = None
    quota: bool = True
    half_life: float | None = DEFAULT_HALF_LIFE  # None: only current use counts
    users: int = 0  # --tree: users per team, each a sub-queue of its team; 0: no tree
    user_weights: tuple[float, ...] = ()
    fair_preemption: bool = False  # fairSharing.preemptionStrategies [LessThanOrEqualTo...]


def workloads(args: argparse.Namespace) -> dict[str, list[Job]]:
    result: dict[str, list[Job]] = {}
    if args.workload in ("lublin", "all"):
        result["lublin"] = read_swf(
            args.trace,
            limit=args.jobs,
            seed=args.seed,
            capacity_cpu=args.capacity,
            timeout_factor=args.timeout_factor,
            priority_weights=args.priority_weights,
        )
    if args.workload in ("synthetic", "all"):
        result["synthetic"] = synthetic(
            args.jobs,
            seed=args.seed,
            capacity_cpu=args.capacity,
            load=SYNTHETIC_LOAD if args.load is None else args.load,
            timeout_factor=args.timeout_factor,
            priority_weights=args.priority_weights,
        )
    if args.workload == "wide":
        result["wide"] = wide(
            args.jobs,
            seed=args.seed,
            capacity_cpu=args.capacity,
            load=WIDE_LOAD if args.load is None else args.load,
            timeout_factor=args.timeout_factor,
            priority_weights=args.priority_weights,
        )
    if args.arrival_scale != 1.0:
        result = {
            name: [replace(j, arrival=j.arrival * args.arrival_scale) for j in jobs]
            for name, jobs in result.items()
        }
    return result


Run = tuple[list[Job], str, int, Teams | None, PlanOptions, QueueConfig | None, float | None]
"""A workload, its policy, the cluster's CPUs, teams, options, queues, and the census's period
(None: the planner sees declarations only)."""


def with_flag_preemption(config: QueueConfig, options: PlanOptions) -> QueueConfig:
    """`config` with the preemption flags as every queue's `preemption:` block. With a queue
    file the planner reads preemption from the file alone (as serve does), so the flags of a
    --teams run must be written into the file it builds, or they would do nothing."""
    block = {
        "withinQueue": options.preemption,
        "gracePeriodSeconds": options.preemption_grace_seconds,
        "minRuntimeSeconds": options.preemption_min_runtime_seconds,
        "maxPerTask": options.preemption_max_per_task,
        "minPreemptorPriority": options.preemption_min_preemptor_priority,
    }
    queues = [
        entry.model_copy(
            update={
                "preemption": PreemptionConfig.model_validate(
                    {**block, **entry.preemption.model_dump(by_alias=True, exclude_none=True)}
                )
            }
        )
        for entry in config.spec.queues
    ]
    return config.model_copy(update={"spec": config.spec.model_copy(update={"queues": queues})})


def run(job: Run) -> Metrics:
    workload, policy, capacity, teams, options, queues, census = job
    if teams is None:
        result = simulate(
            workload,
            policy,
            capacity_cpu=capacity,
            options=options,
            queues=queues,
            census_seconds=census,
        )
        return measure(result)
    config = team_split.team_config(
        teams.count,
        teams.weights,
        capacity,
        MEMORY_BYTES,
        quota=teams.quota,
        half_life=teams.half_life,
        fair_preemption=teams.fair_preemption,
    )
    if teams.users:
        config = team_split.divide(config, teams.users, teams.user_weights)
    config = with_flag_preemption(config, options)
    result = simulate(
        workload,
        policy,
        capacity_cpu=capacity,
        queues=config,
        options=options,
        census_seconds=census,
    )
    fair = team_split.fairness(result.records, teams.count, teams.weights, capacity)
    metrics = replace(
        measure(result),
        jain_index=fair.jain_index,
        team_shares=fair.team_shares,
        contended_seconds=fair.contended_seconds,
        delivered=asdict(team_split.delivered(result.records, teams.count, teams.weights)),
        wide_waits=asdict(wide_waits(result.records, team_split.team_of)),
        offered=team_split.offered(workload, teams.count, teams.weights, capacity),
    )
    if teams.users:
        due = team_split.user_weight_shares(
            teams.count, teams.users, teams.weights, teams.user_weights
        )
        users = team_split.delivered_by(result.records, due, team_split.user_of)
        within = team_split.within_teams(
            result.records, teams.count, teams.users, teams.user_weights
        )
        metrics = replace(metrics, users={**asdict(users), "within_teams": within})
    if teams.idle_until is not None:
        back = team_split.reclaim(
            result.records,
            team_split.team_name(0),
            capacity / teams.count,
            teams.count,
            teams.idle_until,
        )
        late = owed.expected_late(
            result.records, teams.count, teams.weights, teams.idle_until, teams.half_life, capacity
        )
        metrics = replace(metrics, reclaim=asdict(back), late=late)
    return metrics


AutoscaleRun = tuple[str, list[Job], NodeModel, str, PlanOptions, QueueConfig | None]


def autoscale_run(job: AutoscaleRun) -> autoscale.Row:
    return autoscale.run_one(*job)


def compare(
    args: argparse.Namespace,
    loads: dict[str, list[Job]],
    policies: Sequence[str],
    model: NodeModel,
    options: PlanOptions,
    queues: QueueConfig | None,
) -> int:
    """--autoscale: static, rayqueue autoscaling (each policy) and straight to Ray, per workload."""
    runs: list[AutoscaleRun] = []
    for jobs in loads.values():
        runs += [
            (kind, jobs, model, policy, options, queues)
            for policy in policies
            for kind in (autoscale.STATIC, autoscale.AUTOSCALE)
        ]
        runs.append((autoscale.DIRECT, jobs, model, policies[0], options, queues))
    if args.processes > 1 and len(runs) > 1:
        with ProcessPoolExecutor(max_workers=args.processes) as pool:
            rows = list(pool.map(autoscale_run, runs))
    else:
        rows = [autoscale_run(run) for run in runs]
    per = 2 * len(policies) + 1
    types = ", ".join(f"{t.name} {t.resources.cpu:g} CPU x {t.max_count}" for t in model.node_types)
    if model.max_capacity is not None:
        types += f"; budget {model.max_capacity.cpu:g} CPU"
    results: dict[str, object] = {}
    for index, (name, jobs) in enumerate(loads.items()):
        title = (
            f"{name}: {len(jobs)} jobs, ceiling {model.ceiling.cpu:g} CPUs ({types}; head "
            f"{model.head.cpu:g} CPU for jobs), offered load "
            f"{offered_load(jobs, model.ceiling.cpu):.2f}; launch delay "
            f"{duration(model.launch_delay)}, idle timeout {duration(model.idle_timeout)}"
        )
        mine = rows[index * per : (index + 1) * per]
        print(autoscale.table(title, mine), end="\n\n")
        results[name] = [asdict(row) for row in mine]
    if args.json is not None:
        report = {
            "seed": args.seed,
            "node_types": [asdict(t) for t in model.node_types],
            "max_capacity": None if model.max_capacity is None else asdict(model.max_capacity),
            "head_cpu": model.head.cpu,
            "launch_delay": model.launch_delay,
            "idle_timeout": model.idle_timeout,
            "workloads": results,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0
