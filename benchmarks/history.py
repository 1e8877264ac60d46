"""History growth: the cost of one pass as Ray's job history grows (fake Ray adapter).

    python -m benchmarks.history                       # 0 .. 20,000 finished jobs in history
    python -m benchmarks.history --history 0 500       # a quick run

Ray's list_jobs returns every job ever run, so a pass reads the whole history. The run is
repeated with --ray-history-retention, which deletes finished jobs once their final status is
in the sidecar and the retention time has passed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks import common
from benchmarks.common import save, spec_text, table, write_before_start
from reconciler.app.runtime import tune_gc
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import META_QUEUE, META_TASK, SUCCEEDED, Capacity, RayJob

LIVE_TASKS = 100
PASSES = 5


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def measure(history: int, retention: float | None, root: Path) -> dict[str, object]:
    folder = root / f"h{history}-{retention}"
    folder.mkdir()
    for i in range(LIVE_TASKS):
        write_before_start(folder / f"t{i:03d}.yaml", spec_text(priority=i % 10))
    clock = Clock()
    ray = FakeRay(Capacity(8, 0, 2**40), clock=clock)
    queue = "hist"
    for i in range(history):  # finished runs of tasks long gone
        sid = f"old-{i}"
        ray.add_job(
            RayJob(
                sid,
                SUCCEEDED,
                "true",
                start_time=clock.now - 86_400,
                end_time=clock.now - 86_000,
                metadata={META_QUEUE: queue, META_TASK: f"gone-{i}"},
            )
        )
    flags = ["--queue-id", queue]
    if retention is not None:
        flags += ["--ray-history-retention", str(retention)]
    rec = common.serve_loop(common.serve_settings(folder, *flags), ray, clock)
    settle_passes, before = 0, -1
    while len(ray.jobs) != before and settle_passes < 1000:
        # settle; with retention on, old jobs are deleted (a bounded number per pass)
        before = len(ray.jobs)
        rec.run_pass()
        clock.now += 1
        settle_passes += 1
    costs = []
    for _ in range(PASSES):
        cpu = time.process_time()
        rec.run_pass()
        costs.append(time.process_time() - cpu)
        clock.now += 1
    return {
        "history_jobs": history,
        "retention": "off" if retention is None else f"{retention:g}s",
        "jobs_left_in_ray": len(ray.jobs),
        "passes_to_settle": settle_passes,
        "pass_cpu_ms": 1000 * min(costs),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, nargs="+", default=[0, 1000, 5000, 20000])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rq-hist-") as tmp:
        for retention in (None, 3600.0):
            for size in args.history:
                rows.append(measure(size, retention, Path(tmp)))
    print(
        table("pass cost as Ray's history grows", list(rows[0]), [list(r.values()) for r in rows])
    )
    print(f"results: {save('history', {'rows': rows}, args.out)}")


if __name__ == "__main__":
    tune_gc()  # as serve's daemon does; not in main(), which tests call in-process
    main()
