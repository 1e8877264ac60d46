"""What each of serve's reads costs Ray's dashboard and GCS, at several lengths of Ray's job
history: a job listing, a batch of look-ups of single jobs, a capacity read.

    python -m benchmarks.requestcost                       # histories 8, 40, 120
    python -m benchmarks.requestcost --histories 8 40 --calls 100

On a private 4-CPU head, `true` jobs are run until Ray keeps each history length; then each
read is sent `--calls` times in a row while benchmarks/cpushare.py samples the head's
processes. "idle" sleeps 20 ms a call: the dashboard's own background cost, for scale.
"""

from __future__ import annotations

import argparse
import functools
import time
import uuid
from collections.abc import Callable

from benchmarks.common import table
from benchmarks.cpushare import CpuShare
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from reconciler.shell.raycluster.local_head import LocalRayHead
from specs.cluster import SubmitRequest


def grow_history(ray: RayJobsAdapter, ids: list[str], target: int) -> None:
    """Run `true` jobs, 8 at a time, until Ray has kept `target` of them."""
    while len(ids) < target:
        batch = [f"cost-{uuid.uuid4().hex[:8]}" for _ in range(min(8, target - len(ids)))]
        for sid in batch:
            ray.submit(SubmitRequest(sid, "true", None, {}))
        ids += batch
        while any(not j.terminal for j in ray.list_jobs()):
            time.sleep(0.5)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, nargs="+", default=[8, 40, 120])
    parser.add_argument("--calls", type=int, default=150, help="calls of each read per history")
    parser.add_argument("--live", type=int, default=4, help="jobs looked up in one batch")
    args = parser.parse_args(argv)
    head = LocalRayHead()
    rows: list[list[object]] = []
    try:
        ray = RayJobsAdapter(head.start(num_cpus=4))
        ids: list[str] = []
        for target in sorted(args.histories):
            grow_history(ray, ids, target)
            time.sleep(2)
            some = ids[-args.live :]
            reads: dict[str, Callable[[], object]] = {
                "idle (20 ms)": lambda: time.sleep(0.02),
                "listing": ray.list_jobs,
                f"{args.live} look-ups": functools.partial(ray.look_up_jobs, some),
                "capacity": ray.capacity,
            }
            for name, read in reads.items():
                with CpuShare(str(head.temp_dir)) as share:
                    started = time.perf_counter()
                    for _ in range(args.calls):
                        read()
                    wall = time.perf_counter() - started
                cpu = share.totals()
                rows.append(
                    [
                        len(ids),
                        name,
                        round(1000 * cpu.get("dashboard", 0.0) / args.calls, 2),
                        round(1000 * cpu.get("gcs", 0.0) / args.calls, 2),
                        round(1000 * wall / args.calls, 1),
                    ]
                )
            print(f"history {len(ids)} done", flush=True)
    finally:
        head.stop()
    header = ["history", "read", "dashboard_ms_cpu", "gcs_ms_cpu", "wall_ms"]
    print(table("CPU per read, by Ray's history", header, rows))


if __name__ == "__main__":
    main()
