"""The baseline "straight to Ray": no queue, every job submitted as it arrives.

Ray holds each job pending until a node has room and starts pending jobs in arrival order,
any that fits (Ray does not hold a small job behind a big one). The autoscaler sees every
job's demand at once, running and pending, as bundles shaped to the node types, with the
same node model (`nodes.py`) as rayqueue's run. No planner: nothing protects the head and no
quota or in-flight limit holds work back. Jobs run their full run time (no timeouts: every
declared bound is at least the run).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence

from reconciler.sim.engine import JobRecord, SimResult
from reconciler.sim.nodes import Nodes, split
from reconciler.sim.workload import Job
from specs.cluster import Capacity
from specs.task.models import Phase

END, NODE = 0, 1


def straight_to_ray(workload: Sequence[Job], nodes: Nodes) -> SimResult:
    began = time.perf_counter()
    arrivals = sorted(workload, key=lambda j: (j.arrival, j.name))
    records = {job.name: JobRecord(job) for job in arrivals}
    result = SimResult("straight to Ray", nodes.model.ceiling.cpu, list(records.values()))
    result.nodes = nodes
    pending: list[Job] = []
    running: dict[str, float] = {}
    events: list[tuple[float, int, str]] = []
    node_events: set[float] = set()
    next_arrival = 0
    types = nodes.model.node_types
    while next_arrival < len(arrivals) or events:
        now = min(
            arrivals[next_arrival].arrival if next_arrival < len(arrivals) else float("inf"),
            events[0][0] if events else float("inf"),
        )
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival <= now:
            pending.append(arrivals[next_arrival])
            next_arrival += 1
        while events and events[0][0] <= now:
            _, kind, name = heapq.heappop(events)
            if kind == END:
                del running[name]
                records[name].end = now
        result.passes += 1
        free = nodes.capacity(now).cpu - sum(running.values())
        waiting: list[Job] = []
        for job in pending:
            if job.cpu <= free + 1e-9:
                free -= job.cpu
                running[job.name] = job.cpu
                record = records[job.name]
                record.start = record.last_start = now
                record.phase = Phase.SUCCEEDED
                heapq.heappush(events, (now + job.run, END, job.name))
            else:
                waiting.append(job)
        pending = waiting
        nodes.place(running, now)
        demand: list[Capacity] = []
        for cpu in running.values():
            demand += split(Capacity(cpu), types)
        for job in pending:
            demand += split(Capacity(job.cpu), types)
        nodes.scale(demand, now)
        due = nodes.next_due(now)
        if due is not None and due not in node_events:
            node_events.add(due)
            heapq.heappush(events, (due, NODE, ""))
    result.unfinished = sum(1 for r in records.values() if r.end is None)
    result.wall_seconds = time.perf_counter() - began
    return result
