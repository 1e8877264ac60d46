"""Scale of the folder, from a start: cold start, memory, sidecars on disk, 1 % changed.

On the loop `serve` builds (reconciler/app/assembly.py), with the watcher running as in
`serve` and a fake Ray of 8 CPUs (so nearly every task waits, Queued: the shape of a busy
queue), over a prepared folder of N specs (benchmarks/bigfolder.py: written once from a
template, copied with `cp -a` for each run). Each run is a process of its own, so its RSS is
its own; the figures are the median of --runs runs, with the load average beside them.

- cold_start_s / _cpu_s: the first pass, wall and CPU: every spec read, every status decided.
- sidecars_cpu_s: the process's CPU from before the first pass until every sidecar is on disk
  (the deferred backlog written status_write_budget per pass, as serve's loop does);
  drain_cpu_s: the part of it after the first pass.
- rss_mb: VmRSS once the sidecars are written; peak_rss_mb: VmHWM.
- changed_1pct_pass_cpu_ms: a pass after 1 % of the specs were rewritten (whole, by rename).

python -m benchmarks.scale_start --sizes 10000 50000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import bigfolder, common
from benchmarks.common import drop, save, table

REPO = Path(__file__).resolve().parent.parent
CHANGE_ROUNDS = 3


def _memory() -> tuple[float, float]:
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def one_run(size: int, root: Path) -> dict[str, Any]:
    """One measurement, in this process (called in a child process by main)."""
    from reconciler.app.assembly import ARM_WAIT_SECONDS, start_watcher
    from reconciler.app.runtime import first_pass_gc, tune_gc
    from reconciler.shell.raycluster.fake import FakeRay
    from specs.cluster import Capacity

    tune_gc()  # as serve's daemon does
    folder = bigfolder.copy_of(size, root / f"tasks-{size}")
    ray = FakeRay(Capacity(8, 0, 2**40))
    rec = common.serve_loop(common.serve_settings(folder, "--queue-id", "bench"), ray)
    stop = threading.Event()
    watcher = start_watcher(rec, stop)  # serve starts it beside the loop
    rec.events.wait_armed(ARM_WAIT_SECONDS)  # and its first pass once it is armed (start_loop)
    cpu0 = time.process_time()
    wall = time.perf_counter()
    with first_pass_gc():  # as serve's loop runs its first pass (start_loop's `first`)
        rec.run_pass()
    cold_wall, cold_cpu = time.perf_counter() - wall, time.process_time() - cpu0
    deadline = time.monotonic() + 60
    while not rec.events.is_armed and time.monotonic() < deadline:
        time.sleep(0.01)
    passes = 0
    while True:  # serve's loop runs at the busy pace (0.1 s) while a backlog remains
        rec.run_pass()
        passes += 1
        if not rec.store.deferred_statuses:
            break
    sidecars_cpu = time.process_time() - cpu0
    written = sum(1 for n in os.listdir(folder) if n.endswith(".status.yaml"))
    rss, peak = _memory()
    changed = []
    for round_ in range(CHANGE_ROUNDS):
        edits = range(0, size, 100)
        for i in edits:
            drop(folder, f"t{i:05d}", bigfolder.template((i + round_ + 1) % 10, i))
        time.sleep(0.5)  # the watcher hands the events over
        cpu = time.process_time()
        rec.run_pass()
        changed.append(time.process_time() - cpu)
        entries = rec.store.scanned() or {}
        seen = sum(
            1
            for i in edits
            if (task := entries[f"t{i:05d}"].task) is not None
            and task.spec.priority == (i + round_ + 1) % 10
        )
        assert seen == len(edits), f"the pass took {seen} of {len(edits)} edits in"
    stop.set()
    watcher.join(5)
    return {
        "specs": size,
        "cold_start_s": cold_wall,
        "cold_start_cpu_s": cold_cpu,
        "sidecars_cpu_s": sidecars_cpu,
        "drain_cpu_s": sidecars_cpu - cold_cpu,
        "drain_passes": passes,
        "sidecars_written": written,
        "rss_mb": rss,
        "peak_rss_mb": peak,
        "changed_1pct_pass_cpu_ms": 1000 * statistics.median(changed),
    }


def run_child(size: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rq-bench-start-") as tmp:
        command = [sys.executable, "-m", "benchmarks.scale_start", "--child", str(size)]
        env = {**os.environ, "RQ_BENCH_TMP": tmp}
        out = subprocess.run(command, cwd=REPO, env=env, check=True, capture_output=True)
        row: dict[str, Any] = json.loads(out.stdout.decode().strip().splitlines()[-1])
        shutil.rmtree(tmp, ignore_errors=True)
        return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000])
    parser.add_argument("--runs", type=int, default=3, help="runs per size; the median is shown")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="JSON result file")
    args = parser.parse_args(argv)
    if args.child is not None:
        row = one_run(args.child, Path(os.environ["RQ_BENCH_TMP"]))
        print(json.dumps(row))
        return
    rows, runs = [], []
    for size in args.sizes:
        bigfolder.prepared(size)  # made once, outside the measurement
        each = []
        for _ in range(args.runs):
            load = os.getloadavg()[0]
            row = run_child(size)
            row["load_1min"] = load
            each.append(row)
            print(json.dumps(row), flush=True)
        runs += each
        median = {k: statistics.median(r[k] for r in each) for k in each[0]}
        median["specs"] = size
        rows.append(median)
    header = list(rows[0])
    cells = [[r[h] for h in header] for r in rows]
    print(table("scale from a start (median of runs)", header, cells))
    print(f"results: {save('scale_start', {'rows': rows, 'runs': runs}, args.out)}")


if __name__ == "__main__":
    main()
