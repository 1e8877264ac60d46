"""python -m reconciler.sim: run workloads through the real planner and print the results table.

python -m reconciler.sim                                   # synthetic workload, 3 policies
python -m reconciler.sim --trace lublin_256.swf            # trace prefix + synthetic
python -m reconciler.sim --workload synthetic --jobs 500 --policies strict,backfill
python -m reconciler.sim --teams 4 --weights 1,1,1,3   # team folders with fair-share queues
python -m reconciler.sim --tree 4x2 --weights 1,1,1,3 --user-weights 1,3   # nested: users
python -m reconciler.sim --queues _queues.yaml --resumable-fraction 0.5  # a queue file, as serve
python -m reconciler.sim --teams 2 --preemption LowerPriority --array-fraction 0.1 --array-size 20
python -m reconciler.sim --autoscale --node-type worker:cpu=32,max=8 --trace lublin_256.swf
python -m reconciler.sim --workload wide --capacity 128      # power-of-two widths, load 0.95
python -m reconciler.sim --overuse 0.3:3 --underuse 0.2:0.5  # jobs that do not keep their word
python -m reconciler.sim --overuse 0.3:3 --compare-charging  # charged what Ray holds, and not
python -m reconciler.sim matrix --trace lublin_256.swf       # the benchmark matrix (matrix.py)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace

from reconciler.core.admission.policies import POLICIES
from reconciler.sim import matrix
from reconciler.sim import teams as team_split
from reconciler.sim.flags import PREEMPTION_FLAGS, build_parser
from reconciler.sim.nodes import MEMORY_PER_CPU, NodeModel
from reconciler.sim.report import table
from reconciler.sim.runs import Run, Teams, compare, run, workloads
from reconciler.sim.workload import make_arrays, mark_real_use, mark_resumable, offered_load
from specs.cluster import Capacity
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.yamlio.parse import SpecParseError


def _smaller(a: Capacity | None, b: Capacity | None) -> Capacity | None:
    """The smaller per resource of two budgets, either of which may be absent."""
    if a is None or b is None:
        return a if b is None else b
    return Capacity(min(a.cpu, b.cpu), min(a.gpu, b.gpu), min(a.memory, b.memory))


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["matrix"]:
        return matrix.main(argv[1:])
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
    if args.workload not in ("synthetic", "wide") and args.trace is None:
        print(f"workload {args.workload} reads a trace; pass --trace PATH (an SWF file)")
        return 2
    if args.workload not in ("synthetic", "wide") and not args.trace.is_file():
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
    fractions = sum(m.fraction for m in (args.overuse, args.underuse) if m is not None)
    if fractions > 1:
        print(
            "--overuse and --underuse draw from the same jobs: their fractions add up to 1 at most"
        )
        return 2
    if args.autoscale and (args.overuse or args.underuse):
        print("--overuse and --underuse go without --autoscale: its autoscaler sees declarations")
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
        name: mark_real_use(
            mark_resumable(jobs, args.resumable_fraction, args.seed),
            args.overuse,
            args.underuse,
            args.capacity,
            args.seed,
        )
        for name, jobs in workloads(args).items()
    }
    if queues is not None:
        listed = [q.name for q in queues.spec.queues]
        loads = {name: team_split.split_over(jobs, listed) for name, jobs in loads.items()}
    if args.tree is not None:
        if args.teams > 0:
            print("--tree replaces --teams: give one of them")
            return 2
        args.teams = args.tree[0]
    elif args.user_weights is not None:
        print("--user-weights goes with --tree")
        return 2
    if args.team_load is not None and args.teams <= 0:
        print("--team-load goes with --teams or --tree")
        return 2
    teams: Teams | None = None
    if args.teams > 0:
        weights = tuple(args.weights or [1.0] * args.teams)
        if len(weights) != args.teams:
            print(f"--weights gives {len(weights)} weights for {args.teams} teams")
            return 2
        if args.team_load is not None and len(args.team_load) != args.teams:
            print(f"--team-load gives {len(args.team_load)} parts for {args.teams} teams")
            return 2
        users = args.tree[1] if args.tree is not None else 0
        user_weights = tuple(args.user_weights or [1.0] * users)
        if len(user_weights) != users:
            print(f"--user-weights gives {len(user_weights)} weights for {users} users")
            return 2
        teams = Teams(
            args.teams,
            weights,
            args.idle_team_until,
            args.team_quota == "equal",
            args.usage_half_life,
            users,
            user_weights,
            args.fair_preemption,
        )
        if users:
            loads = {
                n: team_split.split_tree(jobs, args.teams, users, args.team_load)
                for n, jobs in loads.items()
            }
        else:
            loads = {
                name: team_split.split(jobs, args.teams, args.team_load)
                for name, jobs in loads.items()
            }
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
    if args.census_seconds <= 0:
        print("--census-seconds must be > 0 (--no-charge-held: no census)")
        return 2
    if model is not None:
        return compare(args, loads, policies, model, options, queues)
    census = args.census_seconds if args.charge_held else None
    # Each policy as asked, then with --compare-charging each again on declarations only.
    censuses = [census, None] if args.compare_charging and census is not None else [census]
    labels = [
        f"{p}/declared" if c is None and census is not None else p
        for c in censuses
        for p in policies
    ]
    runs: list[Run] = [
        (jobs, policy, args.capacity, teams, options, queues, period)
        for jobs in loads.values()
        for period in censuses
        for policy in policies
    ]
    if args.processes > 1 and len(runs) > 1:
        with ProcessPoolExecutor(max_workers=args.processes) as pool:
            metrics = list(pool.map(run, runs))
    else:
        metrics = [run(job) for job in runs]
    metrics = [replace(m, policy=labels[i % len(labels)]) for i, m in enumerate(metrics)]

    results: dict[str, object] = {}
    for index, (name, jobs) in enumerate(loads.items()):
        rows = metrics[index * len(labels) : (index + 1) * len(labels)]
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
        "overuse": None if args.overuse is None else asdict(args.overuse),
        "underuse": None if args.underuse is None else asdict(args.underuse),
        "census_seconds": census,
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


if __name__ == "__main__":
    sys.exit(main())
