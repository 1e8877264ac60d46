"""Scale of the folder: pass costs in-process (fake Ray), then `rayqueue serve` idle (real Ray).

In-process, on the loop `serve` builds: cold start, a full rescan pass, a steady pass, the pass in
which a job ends and the next task starts, a pass after 1 % of the specs changed, Ray calls per
pass. A full rescan walks the folder and every sidecar (the loop does one every --rescan-interval,
and whenever events may have been lost); a steady pass, with the watcher running as in `serve`,
reads only what file events named.

Then `rayqueue serve` as a process on a private Ray head, on a folder of the same size
(benchmarks/served_scale.py): time to take every spec in, CPU per second while idle and RSS, read
from /proc.

python -m benchmarks.scale                                   # 100 .. 50,000 specs
python -m benchmarks.scale --sizes 50 --serve-window 5       # a quick run
python -m benchmarks.scale --sizes 1000 --serve-window 0     # in-process only, no Ray
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import bigfolder, common, served_scale
from benchmarks.common import drop, peak_rss_mb, save, spec_text, table
from reconciler.app.assembly import start_watcher
from reconciler.app.runtime import tune_gc
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity

PASSES = 5


class Phases:
    """Wall time of each part of a run, printed as it goes: where a long run's time went."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.started = self.last = time.monotonic()
        self.parts: list[str] = []

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.parts.append(f"{name} {now - self.last:.1f}")
        self.last = now

    def total(self) -> float:
        print(f"{self.size} specs, wall s: {', '.join(self.parts)}", flush=True)
        return time.monotonic() - self.started


def measure(size: int, root: Path) -> dict[str, float]:
    phases = Phases(size)
    folder = bigfolder.copy_of(size, root / f"tasks-{size}")  # t00000.yaml ..., priority i % 10
    phases.done("copy")
    # Only a few fit, so nearly every task stays Queued: the common shape of a busy queue.
    ray = FakeRay(Capacity(8, 0, 2**40))
    rec = common.serve_loop(common.serve_settings(folder, "--queue-id", "bench"), ray)

    wall, cpu = time.perf_counter(), time.process_time()
    rec.run_pass()
    cold_wall, cold_cpu = time.perf_counter() - wall, time.process_time() - cpu
    rec.run_pass()  # statuses settle (positions after the first admissions)
    phases.done("cold start")

    full = []
    for _ in range(PASSES):  # no watcher yet: every pass walks everything
        cpu = time.process_time()
        rec.run_pass()
        full.append(time.process_time() - cpu)
    phases.done("walks")

    stop = threading.Event()
    watcher = start_watcher(rec, stop)
    deadline = time.monotonic() + 30
    while not rec.events.is_armed and time.monotonic() < deadline:
        time.sleep(0.05)
    rec.run_pass()  # the full walk that follows arming
    # The first pass wrote only what must be durable; the other first sidecars are deferred
    # and flushed status_write_budget per pass. Steady is what follows once they are all out.
    drain_passes, drain_cpu = 0, time.process_time()
    while rec.store.deferred_statuses and drain_passes < 10 * size:
        rec.run_pass()
        drain_passes += 1
    drain_cpu = time.process_time() - drain_cpu
    phases.done("arm + sidecars")
    calls_before = sum(ray.calls.values())
    steady = []
    skipped = rec.skipped
    for _ in range(PASSES):
        cpu = time.process_time()
        rec.run_pass()
        steady.append(time.process_time() - cpu)
    skipped = rec.skipped - skipped
    # The same, with the still-pass shortcut taken away: what a pass costs when Ray's answer
    # changed but nothing of the folder did (the incremental planner over unchanged tasks).
    unskipped = []
    for _ in range(PASSES):
        rec.force_full_pass()
        cpu = time.process_time()
        rec.run_pass()
        unskipped.append(time.process_time() - cpu)
    calls_per_pass = (sum(ray.calls.values()) - calls_before) / PASSES
    phases.done("steady")

    # A job ends and the next task starts: the pass that sees it (the event the scale goals'
    # "pass when a job starts or ends" is about), then the writes that start deferred.
    ended = []
    for _ in range(PASSES):
        running = [sid for sid, job in ray.jobs.items() if job.status in ("PENDING", "RUNNING")]
        ray.set_status(running[0], "SUCCEEDED")
        cpu = time.process_time()
        rec.run_pass()
        ended.append(time.process_time() - cpu)
        # The moved positions are written once 10 s old (position_write_seconds): wait them
        # out at serve's busy pace, so that the next end's pass carries no backlog.
        while rec.store.deferred_statuses:
            rec.run_pass()
            time.sleep(0.1)
    ended.sort()
    phases.done("job ends")

    changed = []
    seen = 0
    for round_ in range(PASSES):
        edits = {f"t{i:05d}": (i + round_ + 1) % 10 for i in range(0, size, 100)}  # 1% change
        for name, priority in edits.items():
            drop(folder, name, spec_text(priority=priority))  # whole, as the API or git-sync
        time.sleep(0.5)  # the watcher hands the events over
        cpu = time.process_time()
        rec.run_pass()
        changed.append(time.process_time() - cpu)
        # The pass must have taken the edits in, or it measured nothing (a settle wait):
        # what that pass's scan returned, read without another walk of the folder.
        entries = rec.store.scanned() or {}
        seen += sum(
            1
            for name, priority in edits.items()
            if (task := entries[name].task) is not None and task.spec.priority == priority
        )
    phases.done("1 % changed")
    stop.set()
    watcher.join(5)
    return {
        "specs": size,
        "cold_start_s": cold_wall,
        "cold_start_cpu_s": cold_cpu,
        "full_rescan_pass_cpu_ms": 1000 * min(full),
        "deferred_sidecar_passes": drain_passes,
        "deferred_sidecar_cpu_s": drain_cpu,
        "steady_pass_cpu_ms": 1000 * min(steady),
        "steady_passes_skipped": skipped / PASSES,
        "steady_unskipped_pass_cpu_ms": 1000 * min(unskipped),
        "job_end_pass_cpu_ms": 1000 * ended[len(ended) // 2],  # median
        "job_end_pass_cpu_ms_min": 1000 * ended[0],
        "changed_1pct_pass_cpu_ms": 1000 * min(changed),
        "changes_seen_by_that_pass": seen / (PASSES * len(range(0, size, 100))),
        "ray_calls_per_pass": calls_per_pass,
        "peak_rss_mb": peak_rss_mb(),
        "bench_wall_s": phases.total(),
    }


def measure_served(sizes: list[int], window: float, address: str | None) -> list[dict[str, object]]:
    from reconciler.shell.raycluster.local_head import LocalRayHead

    # One CPU: the long task holds it, and every other task waits (see served_scale).
    head = LocalRayHead() if address is None else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="rq-bench-served-") as tmp:
        try:
            url = head.start(num_cpus=1) if head is not None else str(address)
            for size in sizes:
                rows.append(served_scale.measure(url, size, Path(tmp), window))
        finally:
            if head is not None:
                head.stop()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000, 50000])
    parser.add_argument(
        "--serve-window",
        type=float,
        default=30,
        help="seconds of idle `rayqueue serve` measured per size (default 30); 0: no serve run",
    )
    parser.add_argument(
        "--address", default=None, help="serve runs against this Ray dashboard, not a private head"
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON result file")
    args = parser.parse_args(argv)
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="rq-bench-") as tmp:
        for size in args.sizes:  # ascending, so each row's peak RSS is its own size's
            rows.append(measure(size, Path(tmp)))
    header = list(rows[0])
    print(table("folder scale (fake Ray adapter)", header, [list(r.values()) for r in rows]))
    served: list[dict[str, object]] = []
    if args.serve_window > 0:
        served = measure_served(args.sizes, args.serve_window, args.address)
        title = "rayqueue serve, idle on a busy queue (real Ray, /proc)"
        print(table(title, list(served[0]), [list(r.values()) for r in served]))
    load = {"before": load_before, "after": os.getloadavg()}
    print(f"load average (1, 5, 15 min): before {load_before}, after {load['after']}")
    payload = {"rows": rows, "served": served, "load_average": load}
    print(f"results: {save('scale', payload, args.out)}")


if __name__ == "__main__":
    tune_gc()  # as serve's daemon does; not in main(), which tests call in-process
    main()
