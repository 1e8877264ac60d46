"""Throughput against raw Ray: N trivial 1-CPU jobs, submitted directly vs. through rayqueue.

    python -m benchmarks.throughput               # N=40 on a private local Ray head (2 CPUs)
    python -m benchmarks.throughput --jobs 4

Both sides run in the same process, against the same head, on the same workload, so the
ratio holds on a noisy machine. Side A is the best a hand-written client can do: keep the
cluster full, poll list_jobs every 0.1 s, submit the next job the moment one ends.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

from benchmarks import common
from benchmarks.common import drop, save, spec_text, table
from reconciler.assembly import start_loop
from reconciler.raycluster.adapter import RayJobsAdapter
from reconciler.raycluster.local_head import LocalRayHead
from specs.cluster import META_QUEUE, SubmitRequest

ENTRYPOINT = "true"


def side_a(ray: RayJobsAdapter, jobs: int, slots: int) -> float:
    """Raw Ray: as many at a time as fit, refilled as they end."""
    tag = uuid.uuid4().hex[:8]
    pending = [f"raw-{tag}-{i}" for i in range(jobs)]
    live: set[str] = set()
    done = 0
    start = time.perf_counter()
    while done < jobs:
        while pending and len(live) < slots:
            sid = pending.pop(0)
            ray.submit(SubmitRequest(sid, ENTRYPOINT, None, {"bench": tag}))
            live.add(sid)
        time.sleep(0.1)
        ended = {j.submission_id for j in ray.list_jobs() if j.submission_id in live and j.terminal}
        live -= ended
        done += len(ended)
    return time.perf_counter() - start


def side_b(ray: RayJobsAdapter, jobs: int, folder: Path) -> float:
    """rayqueue: the same jobs as spec files, reconciled by the real loop and watcher."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = common.serve_settings(folder, "--queue-id", f"tp-{uuid.uuid4().hex[:8]}")
    rec = common.serve_loop(settings, ray)
    stop = threading.Event()
    threads = start_loop(rec, stop)
    time.sleep(0.5)
    start = time.perf_counter()
    try:
        for i in range(jobs):
            drop(folder, f"job{i:04d}", spec_text(ENTRYPOINT, cpu=1))
        while True:
            ours = [j for j in ray.list_jobs() if j.metadata.get(META_QUEUE) == settings.queue_id]
            if len(ours) == jobs and all(j.terminal for j in ours):
                return time.perf_counter() - start
            time.sleep(0.1)
    finally:
        stop.set()
        rec.wake.set()
        threads.join(10)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30, help="jobs per run; each side runs twice")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the private Ray head")
    parser.add_argument(
        "--address", default=None, help="use this Ray dashboard instead of starting a private head"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    head = LocalRayHead() if args.address is None else None
    tmp = ""
    try:
        address = args.address if head is None else head.start(num_cpus=args.cpus)
        ray = RayJobsAdapter(address)
        tmp = tempfile.mkdtemp(prefix="rq-tp-")
        side_a(ray, min(args.jobs, 2), args.cpus)  # warm-up: first job start is slow
        # A, B, B, A: Ray slows down a little as its job history grows, so an ABBA order
        # cancels that drift instead of charging it all to the side that runs second.
        a1 = side_a(ray, args.jobs, args.cpus)
        b1 = side_b(ray, args.jobs, Path(tmp) / "tasks-1")
        b2 = side_b(ray, args.jobs, Path(tmp) / "tasks-2")
        a2 = side_a(ray, args.jobs, args.cpus)
        a, b = (a1 + a2) / 2, (b1 + b2) / 2
    finally:
        if head is not None:
            head.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    row = {
        "jobs": args.jobs,
        "cpus": args.cpus,
        "raw_jobs_per_s": args.jobs / a,
        "rayqueue_jobs_per_s": args.jobs / b,
        "ratio_b_over_a": a / b,
    }
    print(table("throughput against raw Ray", list(row), [list(row.values())]))
    print(f"results: {save('throughput', {'rows': [row]}, args.out)}")


if __name__ == "__main__":
    main()
