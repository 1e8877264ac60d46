"""Drop-to-submit latency: from a spec file landing (atomic rename) to submit_job being called.

python -m benchmarks.latency                      # 200 drops on the fake adapter, 30 on real Ray
python -m benchmarks.latency --drops 20 --real-drops 0
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import common
from benchmarks.common import drop, percentile, save, spec_text, table
from reconciler.assembly import start_loop
from reconciler.raycluster.fake import FakeRay
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


def run(adapter: RayAdapter, drops: int, folder: Path, settle: float = 0.0) -> list[float]:
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
            if settle:
                time.sleep(settle)
    finally:
        stop.set()
        rec.wake.set()
        threads.join(10)
    return latencies


def summary(label: str, values: list[float]) -> dict[str, object]:
    return {
        "adapter": label,
        "drops": len(values),
        "p50_ms": 1000 * percentile(values, 50),
        "p99_ms": 1000 * percentile(values, 99),
        "mean_ms": 1000 * sum(values) / len(values),
        "max_ms": 1000 * max(values),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drops", type=int, default=200)
    parser.add_argument("--real-drops", type=int, default=30, help="0 skips the real Ray run")
    parser.add_argument(
        "--address", default=None, help="real runs use this Ray dashboard instead of a private head"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rq-lat-") as tmp:
        fake = FakeRay(Capacity(10_000, 0, 2**50), auto_advance=True)
        rows.append(summary("fake", run(fake, args.drops, Path(tmp) / "fake")))
        if args.real_drops:
            from reconciler.raycluster.adapter import RayJobsAdapter
            from reconciler.raycluster.local_head import LocalRayHead

            head = LocalRayHead() if args.address is None else None
            try:
                address = args.address if head is None else head.start(num_cpus=2)
                real = RayJobsAdapter(address)
                # settle: let each trivial job finish so the next drop meets an idle cluster
                rows.append(summary("real", run(real, args.real_drops, Path(tmp) / "real", 1.5)))
            finally:
                if head is not None:
                    head.stop()
    print(table("drop-to-submit latency", list(rows[0]), [list(r.values()) for r in rows]))
    print(f"results: {save('latency', {'rows': rows}, args.out)}")


if __name__ == "__main__":
    main()
