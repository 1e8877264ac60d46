"""Drop-to-submit latency, in-process on a fake Ray and through `rayqueue serve` on real Ray.

python -m benchmarks.latency                      # 200 drops in-process, 100 of each through serve
python -m benchmarks.latency --drops 20 --real-drops 0
python -m benchmarks.latency --drops 0 --real-drops 30 --address http://127.0.0.1:8265

In-process: from the atomic rename to the adapter's submit call, on the loop `serve` builds.
Through serve: a `rayqueue serve` child process on a real head (a private one unless
--address); from the start of the write to Ray's own job start_time, for each way users write
(benchmarks.served.METHODS: rayqueue's writer, mv, os.replace, cp, git pull, vim :wq, HTTP).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import common
from benchmarks.common import drop, percentile, save, spec_text, table
from reconciler.app.assembly import start_loop
from reconciler.app.runtime import tune_gc
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import META_TASK, Capacity, RayAdapter, SubmitRequest


class Timed:
    """Wraps an adapter and notes when each task's submit_job is called."""

    def __init__(self, inner: RayAdapter) -> None:
        self.inner = inner
        self.submitted_at: dict[str, float] = {}
        self.event = threading.Event()

    def submit(self, request: SubmitRequest) -> None:
        self.submitted_at[request.metadata[META_TASK]] = time.perf_counter()
        self.event.set()
        self.inner.submit(request)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def run(adapter: RayAdapter, drops: int, folder: Path) -> list[float]:
    """Drop specs one at a time, each after the previous one was submitted."""
    timed = Timed(adapter)
    folder.mkdir(parents=True, exist_ok=True)
    settings = common.serve_settings(folder, "--queue-id", f"lat-{folder.name}")
    # Timed forwards everything but submit() through __getattr__, which mypy cannot see.
    rec = common.serve_loop(settings, timed)  # type: ignore[arg-type]
    stop = threading.Event()
    threads = start_loop(rec, stop)
    time.sleep(0.5)  # the watcher is armed
    latencies = []
    try:
        for i in range(drops):
            name = f"drop{i:04d}"
            timed.event.clear()
            landed = time.perf_counter()
            drop(folder, name, spec_text(cpu=0.01))
            if not timed.event.wait(10):
                raise RuntimeError(f"{name} was not submitted within 10 s")
            latencies.append(timed.submitted_at[name] - landed)
    finally:
        stop.set()
        rec.wake.set()
        threads.join(10)
    return latencies


def summary(label: str, values: list[float]) -> dict[str, object]:
    return {
        "path": label,
        "drops": len(values),
        "p50_ms": 1000 * percentile(values, 50),
        "p99_ms": 1000 * percentile(values, 99),
        "mean_ms": 1000 * sum(values) / len(values),
        "max_ms": 1000 * max(values),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drops", type=int, default=200)
    parser.add_argument(
        "--real-drops",
        type=int,
        default=100,
        help="writes of each kind through serve (default 100); 0: none",
    )
    parser.add_argument(
        "--address", default=None, help="real runs use this Ray dashboard instead of a private head"
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="ways of writing through serve (default: all of benchmarks.served.METHODS)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="rq-lat-") as tmp:
        if args.drops:
            fake = FakeRay(Capacity(10_000, 0, 2**50), auto_advance=True)
            rows.append(summary("in-process, fake Ray", run(fake, args.drops, Path(tmp) / "fake")))
        if args.real_drops:
            from benchmarks import served
            from reconciler.shell.raycluster.local_head import LocalRayHead

            head = LocalRayHead() if args.address is None else None
            try:
                address = args.address if head is None else head.start(num_cpus=2)
                methods = args.methods or served.METHODS
                measured = served.measure(address, args.real_drops, Path(tmp), methods)
            finally:
                if head is not None:
                    head.stop()
            for method, values in measured.items():
                rows.append(summary(f"serve, {method} -> Ray start_time", values))
    load = {"before": load_before, "after": os.getloadavg()}
    print(f"load average (1, 5, 15 min): before {load_before}, after {load['after']}")
    print(table("drop-to-submit latency", list(rows[0]), [list(r.values()) for r in rows]))
    print(f"results: {save('latency', {'rows': rows, 'load_average': load}, args.out)}")


if __name__ == "__main__":
    tune_gc()  # as serve's daemon does; not in main(), which tests call in-process
    main()
