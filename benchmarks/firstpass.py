"""The planner's first pass at a cold start, alone: no read, no writes.

The loop `serve` builds (as benchmarks/scale_start.py does, over the same prepared folder of N
specs and a fake Ray of 8 CPUs) runs its first two passes; the inputs it hands the planner in
each are kept, and the planner is then timed on them again, in this process, --runs times:

- first_pass_cpu_ms: `plan_incremental` from an empty memo on the first pass's inputs (what a
  cold start plans: every task reconciled, every status decided);
- next_pass_cpu_ms: the pass after it (the statuses the loop wrote in between, the memo the
  first pass made).

python -m benchmarks.firstpass --sizes 10000 --runs 5 [--profile 10000]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import bigfolder, common


def _inputs(size: int, root: Path) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The arguments of the planner's first two calls in a fresh `serve` loop."""
    from reconciler.core import incremental
    from reconciler.shell.raycluster.fake import FakeRay
    from specs.cluster import Capacity

    folder = bigfolder.copy_of(size, root / f"tasks-{size}")
    rec = common.serve_loop(
        common.serve_settings(folder, "--queue-id", "bench"), FakeRay(Capacity(8, 0, 2**40))
    )
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    real = incremental.plan_incremental

    def keep(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    incremental.plan_incremental = keep  # the loop looks it up
    try:
        rec.run_pass()
        rec.run_pass()
    finally:
        incremental.plan_incremental = real
    assert len(calls) == 2, f"{len(calls)} planner calls in two passes"
    return calls


def _cpu_ms(
    call: Callable[..., object], args: tuple[Any, ...], kwargs: dict[str, Any], runs: int
) -> list[float]:
    times = []
    for _ in range(runs):
        cpu = time.process_time()
        call(*args, **kwargs)
        times.append(1000 * (time.process_time() - cpu))
    return times


def main(argv: list[str] | None = None) -> None:
    from reconciler.app.runtime import tune_gc
    from reconciler.core import incremental

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000])
    parser.add_argument("--runs", type=int, default=5, help="timed runs; the median is shown")
    parser.add_argument("--profile", type=int, default=None, help="cProfile this size's first pass")
    args = parser.parse_args(argv)
    tune_gc()
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="rq-bench-first-") as tmp:
            (a1, k1), (a2, k2) = _inputs(size, Path(tmp))
            first = incremental.EMPTY, *a1[1:]
            load = os.getloadavg()[0]
            one = _cpu_ms(incremental.plan_incremental, first, k1, args.runs)
            two = _cpu_ms(incremental.plan_incremental, a2, k2, args.runs)
            print(
                f"specs={size} first_pass_cpu_ms={statistics.median(one):.0f} "
                f"({min(one):.0f}-{max(one):.0f}) next_pass_cpu_ms={statistics.median(two):.0f} "
                f"({min(two):.0f}-{max(two):.0f}) load_1min={load:.1f}",
                flush=True,
            )
            if args.profile == size:
                for label, (a, k) in (("first", (first, k1)), ("next", (a2, k2))):
                    prof = cProfile.Profile()
                    prof.runcall(incremental.plan_incremental, *a, **k)
                    print(f"--- {label} pass, by own time")
                    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
                    print(f"--- {label} pass, cumulative")
                    pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
