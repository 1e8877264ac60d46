"""Cost that follows change: a pass when one job ends (and the next starts) over a folder of
waiting tasks, in-process on the loop `serve` builds, with a fake Ray of 8 CPUs and the
watcher running as in `serve` (so the pass reads no file). Reports the pass's CPU, and the
sidecars that start rewrites (counted at the store, until its deferred backlog is empty).

python -m benchmarks.churn --sizes 10000 50000
python -m benchmarks.churn --sizes 10000 --profile      # cProfile of one such pass
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import save, spec_text, table, write_before_start
from reconciler.app.assembly import start_watcher
from reconciler.app.runtime import tune_gc
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity

EVENTS = 5


def measure(size: int, root: Path, profile: bool = False) -> dict[str, Any]:
    folder = root / f"tasks-{size}"
    folder.mkdir()
    for i in range(size):
        write_before_start(folder / f"t{i:05d}.yaml", spec_text(priority=i % 10))
    ray = FakeRay(Capacity(8, 0, 2**40))
    rec = common.serve_loop(common.serve_settings(folder, "--queue-id", "bench"), ray)
    writes = [0]
    original = rec.store._statuses.write_sidecar

    def counted(*args: Any, **kwargs: Any) -> Any:
        writes[0] += 1
        return original(*args, **kwargs)

    rec.store._statuses.write_sidecar = counted  # type: ignore[method-assign]
    stop = threading.Event()
    watcher = start_watcher(rec, stop)
    deadline = time.monotonic() + 30
    while not rec.events.is_armed and time.monotonic() < deadline:
        time.sleep(0.05)
    rec.run_pass()
    rec.run_pass()
    while rec.store.deferred_statuses:  # the first records, deferred, all written
        rec.run_pass()
        time.sleep(0.01)
    tune_gc()  # what the passes so far built is long-lived, as in serve after a while
    cpu_ms, written, wall_written = [], [], []
    prof = cProfile.Profile() if profile else None
    for k in range(EVENTS):
        running = [sid for sid, job in ray.jobs.items() if job.status in ("PENDING", "RUNNING")]
        ray.set_status(running[0], "SUCCEEDED")
        writes[0] = 0
        if prof is not None and k == EVENTS - 1:
            prof.enable()
        cpu = time.process_time()
        rec.run_pass()  # sees the end, starts the next task
        cpu_ms.append(1000 * (time.process_time() - cpu))
        if prof is not None and k == EVENTS - 1:
            prof.disable()
        cpu = time.process_time()
        while rec.store.deferred_statuses:  # what that start makes the loop write
            rec.run_pass()
            time.sleep(0.01)
        written.append(writes[0])
        wall_written.append(time.process_time() - cpu)
    stop.set()
    watcher.join(5)
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    cpu_ms.sort()
    return {
        "specs": size,
        "end_pass_cpu_ms_median": cpu_ms[len(cpu_ms) // 2],
        "end_pass_cpu_ms_min": cpu_ms[0],
        "sidecars_written_per_start": max(written),
        "cpu_s_writing_them": max(wall_written),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 50000])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="JSON result file")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rq-bench-churn-") as tmp:
        for size in args.sizes:
            rows.append(measure(size, Path(tmp), args.profile))
            print(rows[-1], flush=True)  # a long run's sizes, one by one
    header = list(rows[0])
    print(table("cost that follows change", header, [[r[h] for h in header] for r in rows]))
    print(f"results: {save('churn', {'rows': rows}, args.out)}")


if __name__ == "__main__":
    tune_gc()  # as serve's daemon does
    main()
