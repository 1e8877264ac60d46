"""The autoscaling comparison: one workload on a static cluster at the ceiling,
through rayqueue on an autoscaling cluster, and straight to Ray on the same autoscaling cluster.

Each row: p50/p95/mean wait, utilization relative to what was up (the static cluster: all of
it; an autoscaled one: the head's job CPUs and the nodes that were up), node-hours (the nodes
the autoscaler launched or could remove, from launch to removal; the head and every type's
min-count nodes are the same in every row and are left out) and the nodes launched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.sim.direct import straight_to_ray
from reconciler.sim.engine import SimResult, simulate
from reconciler.sim.metrics import percentile
from reconciler.sim.nodes import NodeModel, Nodes
from reconciler.sim.workload import Job
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions

STATIC, AUTOSCALE, DIRECT = "static", "autoscale", "straight to Ray"
KINDS = (STATIC, AUTOSCALE, DIRECT)


@dataclass(frozen=True)
class Row:
    run: str  # e.g. "static (backfill)"
    jobs: int
    unfinished: int
    p50: float
    p95: float
    mean: float
    utilization: float
    node_hours: float
    launches: int
    peak_nodes: int
    wall_seconds: float


def run_one(
    kind: str,
    workload: Sequence[Job],
    model: NodeModel,
    policy: str,
    options: PlanOptions,
    queues: QueueConfig | None = None,
) -> Row:
    """One row of the comparison. Deterministic."""
    if kind == STATIC:
        result = simulate(
            workload, policy, capacity_cpu=model.ceiling.cpu, options=options, queues=queues
        )
        return summarize(f"{STATIC} ({policy})", result, model)
    nodes = Nodes(model)
    if kind == AUTOSCALE:
        result = simulate(
            workload,
            policy,
            capacity_cpu=model.ceiling.cpu,
            options=options,
            queues=queues,
            nodes=nodes,
        )
        return summarize(f"rayqueue {AUTOSCALE} ({policy})", result, model)
    return summarize(DIRECT, straight_to_ray(workload, nodes), model)


def summarize(name: str, result: SimResult, model: NodeModel) -> Row:
    done = [r for r in result.records if r.start is not None and r.end is not None]
    waits = [r.wait or 0.0 for r in done]
    first = min((r.job.arrival for r in result.records), default=0.0)
    end = max((r.end or 0.0 for r in done), default=first)
    used = sum(r.job.cpu * ((r.end or 0.0) - (r.last_start or r.start or 0.0)) for r in done)
    nodes = result.nodes
    if nodes is None:  # static: every node up from the first arrival to the last end
        offered = model.ceiling.cpu * (end - first)
        static = model.scaled_nodes(model.static_counts())
        node_seconds = static * (end - first)
        launches, peak = static, static
    else:
        offered = nodes.up_cpu_seconds(first, end)
        node_seconds = nodes.node_seconds(max(end, nodes.last_change()))
        launches, peak = nodes.launches, nodes.peak
    return Row(
        run=name,
        jobs=len(result.records),
        unfinished=result.unfinished,
        p50=percentile(waits, 50),
        p95=percentile(waits, 95),
        mean=sum(waits) / len(waits) if waits else math.nan,
        utilization=used / offered if offered > 0 else 0.0,
        node_hours=node_seconds / 3600,
        launches=launches,
        peak_nodes=peak,
        wall_seconds=result.wall_seconds,
    )


def _dur(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def table(title: str, rows: Sequence[Row]) -> str:
    """Markdown; each row against the static row of its policy (straight to Ray: the first)."""
    statics = {r.run.removeprefix(STATIC): r for r in rows if r.run.startswith(STATIC)}
    lines = [
        title,
        "",
        "| run | p50 wait | p95 wait | mean wait | utilization of nodes up | node-hours | "
        "p95 / static | node-hours / static | nodes launched (peak) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        base = next((s for p, s in statics.items() if row.run.endswith(p)), rows[0])
        p95_ratio = row.p95 / base.p95 if base.p95 > 0 else math.nan
        hours_ratio = row.node_hours / base.node_hours if base.node_hours > 0 else math.nan
        lines.append(
            f"| {row.run} | {_dur(row.p50)} | {_dur(row.p95)} | {_dur(row.mean)} | "
            f"{row.utilization:.1%} | {row.node_hours:,.0f} | {p95_ratio:.2f} | "
            f"{hours_ratio:.2f} | {row.launches} ({row.peak_nodes}) |"
            + (f" {row.unfinished} unfinished" if row.unfinished else "")
        )
    return "\n".join(lines)
