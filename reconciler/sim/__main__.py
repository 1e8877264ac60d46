"""python -m reconciler.sim: run workloads through the real planner and print the results table.

python -m reconciler.sim                                   # synthetic workload, 3 policies
python -m reconciler.sim --trace lublin_256.swf            # trace prefix + synthetic
python -m reconciler.sim --workload synthetic --jobs 500 --policies strict,backfill
python -m reconciler.sim --teams 4 --weights 1,1,1,3   # team folders with fair-share queues
python -m reconciler.sim --queues _queues.yaml --resumable-fraction 0.5  # a queue file, as serve
python -m reconciler.sim --teams 2 --preemption LowerPriority --array-fraction 0.1 --array-size 20
python -m reconciler.sim --autoscale --node-type worker:cpu=32,max=8 --trace lublin_256.swf
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from reconciler.core.policies import POLICIES
from reconciler.core.victims import MODES, NEVER
from reconciler.sim import autoscale
from reconciler.sim import teams as team_split
from reconciler.sim.engine import MEMORY_BYTES, simulate
from reconciler.sim.metrics import URGENT_PRIORITY, Metrics, measure
from reconciler.sim.nodes import (
    IDLE_TIMEOUT,
    LAUNCH_DELAY,
    MEMORY_PER_CPU,
    NodeModel,
    parse_node_type,
)
from reconciler.sim.workload import (
    PRIORITIES,
    TIMEOUT_FACTOR,
    Job,
    make_arrays,
    mark_resumable,
    offered_load,
    read_swf,
    synthetic,
)
from specs.cluster import Capacity, NodeType
from specs.parse import SpecParseError, parse_queue_config
from specs.queues import DEFAULT_HALF_LIFE, QueueConfig, parse_capacity, parse_duration
from specs.settings import PlanOptions

URGENT_TIER_TEXT = "13,13,13,13,13,13,12,5,3,2"
"""An urgent tier: priorities 7, 8 and 9 are 5, 3 and 2 % of the jobs, the rest share 90 %."""

TABLE_LEVELS = (9, 5, 0)  # top, middle and bottom priority in the main table


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m reconciler.sim", description=__doc__.split("\n")[0])
    p.add_argument(
        "--workload",
        choices=["lublin", "synthetic", "all"],
        default=None,
        help="default: all with --trace, synthetic without",
    )
    # No default path: the trace is data outside the repository, so the caller names it.
    p.add_argument("--trace", type=Path, default=None, metavar="PATH", help="SWF trace for lublin")
    p.add_argument("--jobs", type=int, default=2000, help="trace prefix / synthetic job count")
    p.add_argument("--seed", type=int, default=1, help="seeds timeouts, priorities, synthetic")
    p.add_argument("--load", type=float, default=0.9, help="offered load of the synthetic one")
    p.add_argument("--capacity", type=int, default=256, help="CPUs of the simulated cluster")
    p.add_argument(
        "--arrival-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="multiply every arrival time by F (0.35 offers a trace ~2.9 times its load)",
    )
    p.add_argument(
        "--timeout-factor",
        type=_factor,
        default=TIMEOUT_FACTOR,
        metavar="LOW,HIGH",
        help="declared timeoutSeconds = run x U[LOW, HIGH] (default 1,5)",
    )
    p.add_argument(
        "--priority-weights",
        type=_priority_weights,
        default=None,
        metavar="W0,...,W9",
        help="relative share of each priority 0..9 (default uniform); e.g. an urgent tier: "
        f"{URGENT_TIER_TEXT}",
    )
    p.add_argument(
        "--policies",
        default=",".join(POLICIES),
        help=f"comma-separated, from {', '.join(POLICIES)} (default all)",
    )
    p.add_argument(
        "--teams",
        type=int,
        default=0,
        help="split the workload over N team folders (job i to team i mod N), one queue each",
    )
    p.add_argument(
        "--weights",
        type=_weights,
        default=None,
        metavar="W1,W2,...",
        help="fair-sharing weight per team (default all 1)",
    )
    p.add_argument(
        "--team-quota",
        choices=["equal", "none"],
        default="equal",
        help="nominal quota per team: an equal split of the cluster (default), or none, so "
        "that every start borrows and the weights alone divide the cluster",
    )
    p.add_argument(
        "--usage-half-life",
        type=_half_life,
        default=DEFAULT_HALF_LIFE,
        metavar="DURATION",
        help="with --teams: past use counts half after this long (168h, 7d, seconds), or off "
        "(only current use counts; fairSharing.mode CurrentUsage); default 168h",
    )
    p.add_argument(
        "--idle-team-until",
        type=float,
        default=None,
        metavar="SECONDS",
        help="team-0 sends no work before this time: its quota is lent, then must come back",
    )
    p.add_argument(
        "--queues",
        type=Path,
        default=None,
        metavar="FILE",
        help="a queue file in the format of _queues.yaml, preemption: blocks included; job i "
        "goes to its i-th listed queue (mod their number). Replaces --teams and the "
        "preemption flags, as it does for serve",
    )
    # The preemption flags of one queue; None: not given (refused beside --queues).
    p.add_argument(
        "--preemption",
        choices=MODES,
        default=None,
        help=f"the queue's withinQueue preemption (default {NEVER})",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a preempted job holds its CPUs this long before it stops (default 30)",
    )
    p.add_argument(
        "--min-runtime",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a run younger than this is never preempted (default 0)",
    )
    p.add_argument(
        "--max-preemptions",
        type=int,
        default=None,
        metavar="N",
        help="a job preempted N times is spared from then on (default 3; 0: no limit)",
    )
    p.add_argument(
        "--min-preemptor-priority",
        type=_priority,
        default=None,
        metavar="N",
        help="only a job of priority N or more may preempt (default 0: any higher priority)",
    )
    p.add_argument(
        "--resumable-fraction",
        type=_fraction,
        default=0.0,
        metavar="F",
        help="each job is resumable with probability F (seeded by --seed): preempted, it "
        "loses only its grace period (default 0)",
    )
    p.add_argument(
        "--array-fraction",
        type=_fraction,
        default=0.0,
        metavar="F",
        help="each job becomes a task array with probability F (seeded by --seed): "
        "--array-size copies of it, elements NAME[i] (default 0)",
    )
    p.add_argument(
        "--array-size", type=_positive, default=10, metavar="N", help="elements per array (10)"
    )
    p.add_argument(
        "--array-max-parallel",
        type=_positive,
        default=None,
        metavar="M",
        help="each array's maxParallel (default: its size, no cap)",
    )
    p.add_argument(
        "--autoscale",
        action="store_true",
        help="compare a static cluster at the ceiling, rayqueue on an autoscaling cluster and "
        "the jobs straight to Ray on it (needs --node-type; the ceiling replaces --capacity)",
    )
    p.add_argument(
        "--node-type",
        type=_node_type,
        action="append",
        default=[],
        metavar="NAME:cpu=N,max=M",
        help="a worker node type (repeatable); also min=K, gpu=G, memory=GIB. Default with "
        "--autoscale: the --queues file's cluster: nodeTypes",
    )
    p.add_argument(
        "--max-capacity",
        type=_capacity,
        default=None,
        metavar="cpu=N,gpu=N,memory=Q",
        help="--autoscale: a budget that lowers the ceiling rayqueue plans with, as serve's "
        "flag (a resource left out is 0); with the --queues file's cluster: maxCapacity, the "
        "smaller holds. Ray's autoscaler does not know it",
    )
    p.add_argument(
        "--head-cpu",
        type=float,
        default=0.0,
        metavar="N",
        help="CPUs the static head offers to jobs (default 0: the head runs none)",
    )
    p.add_argument(
        "--launch-delay",
        type=float,
        default=LAUNCH_DELAY,
        metavar="SECONDS",
        help=f"a launched node is up this much later (default {LAUNCH_DELAY:g})",
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=IDLE_TIMEOUT,
        metavar="SECONDS",
        help=f"a node idle this long, and not requested, is removed (default {IDLE_TIMEOUT:g})",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the metrics here")
    p.add_argument(
        "--processes",
        type=int,
        default=min(os.cpu_count() or 1, 4),
        help="runs in parallel (results do not depend on it)",
    )
    return p


def _factor(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    bounds = (float(low), float(high or low))
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError("need 1 <= LOW <= HIGH: a job must end within its bound")
    return bounds


def _smaller(a: Capacity | None, b: Capacity | None) -> Capacity | None:
    """The smaller per resource of two budgets, either of which may be absent."""
    if a is None or b is None:
        return a if b is None else b
    return Capacity(min(a.cpu, b.cpu), min(a.gpu, b.gpu), min(a.memory, b.memory))


def _capacity(text: str) -> Capacity:
    try:
        return parse_capacity(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _node_type(text: str) -> NodeType:
    try:
        return parse_node_type(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a fraction 0..1 (got {text!r})")
    return value


# The flag, its dest, and the value it has when not given: the settings' default.
_DEFAULTS = PlanOptions()
PREEMPTION_FLAGS: tuple[tuple[str, str, object], ...] = (
    ("--preemption", "preemption", _DEFAULTS.preemption),
    ("--grace", "grace", _DEFAULTS.preemption_grace_seconds),
    ("--min-runtime", "min_runtime", _DEFAULTS.preemption_min_runtime_seconds),
    ("--max-preemptions", "max_preemptions", _DEFAULTS.preemption_max_per_task),
    (
        "--min-preemptor-priority",
        "min_preemptor_priority",
        _DEFAULTS.preemption_min_preemptor_priority,
    ),
)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1 (got {text!r})")
    return value


def _priority(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < PRIORITIES:
        raise argparse.ArgumentTypeError(f"a priority 0..{PRIORITIES - 1} (got {text!r})")
    return value


def _priority_weights(text: str) -> tuple[float, ...]:
    try:
        weights = tuple(float(w) for w in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("ten numbers, e.g. " + URGENT_TIER_TEXT) from None
    if len(weights) != PRIORITIES or any(w < 0 for w in weights) or not any(weights):
        raise argparse.ArgumentTypeError("ten shares >= 0 for priorities 0..9, not all 0")
    return weights


def _half_life(text: str) -> float | None:
    if text.strip().lower() == "off":
        return None
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError("the half-life must be > 0 (or off)")
    return seconds


def _weights(text: str) -> list[float]:
    try:
        weights = [float(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("weights are numbers, e.g. 1,1,3") from None
    if not weights or any(w <= 0 for w in weights):
        raise argparse.ArgumentTypeError("weights must be > 0")
    return weights


@dataclass(frozen=True)
class Teams:
    count: int
    weights: tuple[float, ...]
    idle_until: float | None = None
    quota: bool = True
    half_life: float | None = DEFAULT_HALF_LIFE  # None: only current use counts


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
            load=args.load,
            timeout_factor=args.timeout_factor,
            priority_weights=args.priority_weights,
        )
    if args.arrival_scale != 1.0:
        result = {
            name: [replace(j, arrival=j.arrival * args.arrival_scale) for j in jobs]
            for name, jobs in result.items()
        }
    return result


Run = tuple[list[Job], str, int, Teams | None, PlanOptions, QueueConfig | None]


def _run(job: Run) -> Metrics:
    workload, policy, capacity, teams, options, queues = job
    if teams is None:
        result = simulate(workload, policy, capacity_cpu=capacity, options=options, queues=queues)
        return measure(result)
    config = team_split.team_config(
        teams.count,
        teams.weights,
        capacity,
        MEMORY_BYTES,
        quota=teams.quota,
        half_life=teams.half_life,
    )
    result = simulate(workload, policy, capacity_cpu=capacity, queues=config, options=options)
    fair = team_split.fairness(result.records, teams.count, teams.weights, capacity)
    metrics = replace(
        measure(result),
        jain_index=fair.jain_index,
        team_shares=fair.team_shares,
        contended_seconds=fair.contended_seconds,
        delivered=asdict(team_split.delivered(result.records, teams.count, teams.weights)),
    )
    if teams.idle_until is not None:
        back = team_split.reclaim(
            result.records,
            team_split.team_name(0),
            capacity / teams.count,
            teams.count,
            teams.idle_until,
        )
        metrics = replace(metrics, reclaim=asdict(back))
    return metrics


def _team_lines(rows: Sequence[Metrics]) -> list[str]:
    lines = ["", "teams (weight-normalised CPU share while every team had waiting work):", ""]
    for m in rows:
        if m.team_shares is None:
            continue
        shares = ", ".join(f"{t} {v:.3f}" for t, v in m.team_shares.items())
        lines.append(
            f"- {m.policy}: Jain {m.jain_index:.3f}; {shares}; "
            f"contended {duration(m.contended_seconds or 0)}"
        )
        if m.delivered is not None:
            d = m.delivered
            run = d["run_shares"]
            hot = d["contended_shares"]
            waits = d["p95_wait"]
            assert isinstance(run, dict) and isinstance(hot, dict) and isinstance(waits, dict)
            lines.append(
                "  share of delivered CPU-hours, run: "
                + " / ".join(f"{v:.3f}" for v in run.values())
                + "; contended: "
                + " / ".join(f"{v:.3f}" for v in hot.values())
                + f"; weighted Jain {d['weighted_jain']:.3f}"
                + (
                    f"; sliding days ({d['windows']}): Jain min {d['window_jain_min']:.3f}, "
                    f"mean {d['window_jain_mean']:.3f}"
                    if d["windows"]
                    else ""
                )
                + "; p95 wait "
                + " / ".join(duration(float(v)) for v in waits.values())
            )
        if m.reclaim is not None:
            r = m.reclaim
            regained = r["regained_at"]
            returned = r["returned_at"] or 0.0
            lines.append(
                f"  team-0 returned at {duration(returned)}, others then borrowed "
                f"{r['borrowed_at_return']:g} CPUs; nominal regained "
                + (f"{duration(regained - returned)} later" if regained is not None else "never")
                + f"; CPUs others borrowed meanwhile: {r['borrowed_meanwhile']:g}"
            )
    return lines


def duration(seconds: float) -> str:
    """Compact and readable across six orders of magnitude: 8 s, 14 min, 3.2 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def table(name: str, jobs: Sequence[Job], capacity: int, rows: Sequence[Metrics]) -> str:
    levels = "/".join(str(level) for level in TABLE_LEVELS)
    lines = [
        f"{name}: {len(jobs)} jobs, {capacity} CPUs, offered load "
        f"{offered_load(list(jobs), capacity):.2f}",
        "",
        f"| policy | utilization | p95 wait, priority {levels} | longest wait, priority "
        f"{TABLE_LEVELS[0]} | mean wait | mean bounded slowdown | longest wait |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in rows:
        p95 = " / ".join(
            duration(m.waits[level].p95) if level in m.waits else "-" for level in TABLE_LEVELS
        )
        lines.append(
            f"| {m.policy} | {m.utilization:.1%} | {p95} | {duration(m.top_longest_wait)} | "
            f"{duration(m.mean_wait)} | "
            f"{m.mean_bounded_slowdown:.1f} | {duration(m.longest_wait)} |"
        )
    all_levels = sorted({level for m in rows for level in m.waits}, reverse=True)
    lines += [
        "",
        "p95 (mean) wait by priority, and of wide jobs (at least half the cluster):",
        "",
        "| policy | " + " | ".join(str(level) for level in all_levels) + " | wide |",
        "|---|" + "---|" * (len(all_levels) + 1),
    ]
    for m in rows:
        cells = [
            f"{duration(m.waits[level].p95)} ({duration(m.waits[level].mean)})"
            if level in m.waits
            else "-"
            for level in all_levels
        ]
        cells.append(f"{duration(m.wide.p95)} ({duration(m.wide.mean)})" if m.wide.jobs else "-")
        lines.append(f"| {m.policy} | " + " | ".join(cells) + " |")
    lines += ["", f"priority {URGENT_PRIORITY} and up, and preemption:", ""]
    for m in rows:
        lines.append(
            f"- {m.policy}: p95 wait {duration(m.urgent.p95)}; {m.preemptions} preemptions, "
            f"at most {m.max_preemptions_per_job} of one job; wasted {m.wasted_fraction:.1%} "
            "of the CPU time run"
        )
    lines += ["", "planner cost:", ""]
    for m in rows:
        lines.append(
            f"- {m.policy}: {m.passes} passes, {m.pass_ms:.2f} ms/pass, "
            f"{m.task_us:.0f} us per live task per pass; simulation {m.wall_seconds:.1f} s"
            + (f"; {m.unfinished} jobs unfinished" if m.unfinished else "")
        )
    if any(m.team_shares is not None for m in rows):
        lines += _team_lines(rows)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        print(f"unknown policy {', '.join(unknown)}; choose from {', '.join(POLICIES)}")
        return 2
    if args.arrival_scale <= 0:
        print("--arrival-scale must be > 0")
        return 2
    if args.workload is None:
        args.workload = "synthetic" if args.trace is None else "all"
    if args.workload != "synthetic" and args.trace is None:
        print(f"workload {args.workload} reads a trace; pass --trace PATH (an SWF file)")
        return 2
    if args.workload != "synthetic" and not args.trace.is_file():
        print(f"no trace at {args.trace}; pass --trace PATH or --workload synthetic")
        return 2
    given = [flag for flag, dest, _ in PREEMPTION_FLAGS if getattr(args, dest) is not None]
    queues: QueueConfig | None = None
    if args.queues is not None:
        if args.teams > 0 or given:
            clash = ", ".join(given + (["--teams"] if args.teams > 0 else []))
            print(
                f"{clash}: with --queues, the queue file sets queues and preemption "
                "(its preemption: blocks), as it does for serve"
            )
            return 2
        try:
            queues = parse_queue_config(args.queues.read_bytes(), file=str(args.queues))
        except OSError as exc:
            print(f"cannot read {args.queues}: {exc.strerror}")
            return 2
        except SpecParseError as exc:
            print(str(exc))
            return 2
    for _, dest, default in PREEMPTION_FLAGS:
        if getattr(args, dest) is None:
            setattr(args, dest, default)
    model: NodeModel | None = None
    if args.autoscale and not args.node_type and queues is not None and queues.spec.cluster:
        args.node_type = list(queues.spec.cluster.node_type_values())  # the file's cluster:
    budget = args.max_capacity
    if args.autoscale and queues is not None and queues.spec.cluster:
        budget = _smaller(budget, queues.spec.cluster.max_capacity_value())
    if args.max_capacity is not None and not args.autoscale:
        print("--max-capacity needs --autoscale")
        return 2
    if args.autoscale or args.node_type:
        if not (args.autoscale and args.node_type) or args.teams > 0:
            print(
                "--autoscale needs node types (--node-type, or the --queues file's cluster: "
                "nodeTypes), and --node-type needs --autoscale"
            )
            if args.teams > 0:
                print("--autoscale takes --queues for queues, not --teams")
            return 2
        names = [t.name for t in args.node_type]
        if len(set(names)) != len(names):
            print(f"--node-type names must differ (got {', '.join(names)})")
            return 2
        head = Capacity(args.head_cpu, 0.0, args.head_cpu * MEMORY_PER_CPU)
        model = NodeModel(tuple(args.node_type), head, args.launch_delay, args.idle_timeout, budget)
        args.capacity = int(model.ceiling.cpu)  # the static cluster is the ceiling
    loads = {
        name: mark_resumable(jobs, args.resumable_fraction, args.seed)
        for name, jobs in workloads(args).items()
    }
    if queues is not None:
        listed = [q.name for q in queues.spec.queues]
        loads = {name: team_split.split_over(jobs, listed) for name, jobs in loads.items()}
    teams: Teams | None = None
    if args.teams > 0:
        weights = tuple(args.weights or [1.0] * args.teams)
        if len(weights) != args.teams:
            print(f"--weights gives {len(weights)} weights for {args.teams} teams")
            return 2
        teams = Teams(
            args.teams,
            weights,
            args.idle_team_until,
            args.team_quota == "equal",
            args.usage_half_life,
        )
        loads = {name: team_split.split(jobs, args.teams) for name, jobs in loads.items()}
        if args.idle_team_until is not None:
            idle = team_split.team_name(0)
            loads = {
                name: team_split.drop_until(jobs, idle, args.idle_team_until)
                for name, jobs in loads.items()
            }
    if args.array_fraction > 0:
        # After the split into teams or queues: an array's elements stay in one folder.
        loads = {
            name: make_arrays(
                jobs, args.array_fraction, args.array_size, args.array_max_parallel, args.seed
            )
            for name, jobs in loads.items()
        }
    options = PlanOptions(
        preemption=args.preemption,
        preemption_grace_seconds=args.grace,
        preemption_min_runtime_seconds=args.min_runtime,
        preemption_max_per_task=args.max_preemptions,
        preemption_min_preemptor_priority=args.min_preemptor_priority,
    )
    if model is not None:
        return _compare(args, loads, policies, model, options, queues)
    runs: list[Run] = [
        (jobs, policy, args.capacity, teams, options, queues)
        for jobs in loads.values()
        for policy in policies
    ]
    if args.processes > 1 and len(runs) > 1:
        with ProcessPoolExecutor(max_workers=args.processes) as pool:
            metrics = list(pool.map(_run, runs))
    else:
        metrics = [_run(run) for run in runs]

    results: dict[str, object] = {}
    for index, (name, jobs) in enumerate(loads.items()):
        rows = metrics[index * len(policies) : (index + 1) * len(policies)]
        print(table(name, jobs, args.capacity, rows), end="\n\n")
        results[name] = {
            "jobs": len(jobs),
            "offered_load": offered_load(jobs, args.capacity),
            "policies": {m.policy: m.to_json() for m in rows},
        }
    report = {
        "seed": args.seed,
        "capacity": args.capacity,
        "timeout_factor": list(args.timeout_factor),
        "teams": None if teams is None else asdict(teams),
        "queues": None if args.queues is None else str(args.queues),
        "resumable_fraction": args.resumable_fraction,
        "array_fraction": args.array_fraction,
        "array_size": args.array_size,
        "array_max_parallel": args.array_max_parallel,
        "preemption": args.preemption,
        "grace_seconds": args.grace,
        "min_runtime_seconds": args.min_runtime,
        "max_preemptions": args.max_preemptions,
        "min_preemptor_priority": args.min_preemptor_priority,
        "workloads": results,
    }
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


AutoscaleRun = tuple[str, list[Job], NodeModel, str, PlanOptions, QueueConfig | None]


def _autoscale_run(job: AutoscaleRun) -> autoscale.Row:
    return autoscale.run_one(*job)


def _compare(
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
            rows = list(pool.map(_autoscale_run, runs))
    else:
        rows = [_autoscale_run(run) for run in runs]
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


if __name__ == "__main__":
    sys.exit(main())
