"""Throughput against raw Ray: N trivial 1-CPU jobs, submitted directly vs. through rayqueue.

    python -m benchmarks.throughput                         # 16 jobs, private 4-CPU head
    python -m benchmarks.throughput --jobs 30 --cpus 2      # a smaller head, more jobs
    python -m benchmarks.throughput --jobs 2 --via in-process

Both sides run in the same benchmark run, against the same head, on the same workload, so the
ratio holds on a noisy machine. Side A is the best a hand-written client can do: keep the
cluster full, poll list_jobs every 0.1 s, submit the next job the moment one ends. Side B
drops the same jobs as spec files into a folder watched by `rayqueue serve`, run as a child
process as a user runs it (--via serve, the default), or by the same loop built in this
process through reconciler/app/assembly.py (--via in-process). A run lasts from its first
submission (A) or drop (B) to the end of its last job by Ray's own end_time; then its jobs are
deleted from Ray, so each run starts at the same history. `--breakdown` adds, per side, the
head's CPU by kind of process and the requests each side sent the dashboard.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shlex
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from benchmarks import common, served
from benchmarks.common import drop, save, spec_text, table
from benchmarks.cpushare import CpuShare
from reconciler.app.assembly import start_loop
from reconciler.app.runtime import tune_gc
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from reconciler.shell.raycluster.local_head import LocalRayHead
from specs.cluster import META_QUEUE, JobNotFound, RayAdapter, RayJob, SubmitRequest

ENTRYPOINT = "true"
# A run ends when Ray's last job of it ends, by Ray's own end_time, on both sides. Side B's
# watch for that end is the benchmark's, not serve's: it lists seldom, so that the dashboard
# does not answer on B's behalf a second client's listings that side A does not have (polling
# every 0.1 s would send as many listings as side A's client sends).
WATCH_SECONDS = 1.0


# --breakdown: per run, where the head's CPU went (benchmarks/cpushare.py) and what each side
# asked of the dashboard.
BREAKDOWN: list[dict[str, object]] = []


def side_a(ray: RayJobsAdapter, jobs: int, slots: int, head: LocalRayHead | None = None) -> float:
    """Raw Ray: as many at a time as fit, refilled as they end. With `head`, the run's
    breakdown goes to BREAKDOWN."""
    tag = uuid.uuid4().hex[:8]
    pending = [f"raw-{tag}-{i}" for i in range(jobs)]
    live: set[str] = set()
    done = listings = 0
    share = _share(head)
    cpu0 = time.thread_time()
    start = time.time()
    with share or contextlib.nullcontext():
        while done < jobs:
            while pending and len(live) < slots:
                sid = pending.pop(0)
                ray.submit(SubmitRequest(sid, ENTRYPOINT, None, {"bench": tag}))
                live.add(sid)
            time.sleep(0.1)
            listings += 1
            listed = ray.list_jobs()
            ended = {j.submission_id for j in listed if j.submission_id in live and j.terminal}
            live -= ended
            done += len(ended)
    seconds = _last_end(listed, lambda j: j.metadata.get("bench") == tag) - start
    forget(ray, [j for j in listed if j.metadata.get("bench") == tag])
    if share is not None:
        cpu = {"raw client": time.thread_time() - cpu0, **share.totals()}
        requests = {"list_jobs": listings, "submit": jobs}
        BREAKDOWN.append({"side": "A", "seconds": seconds, "cpu": cpu, "requests": requests})
    return seconds


def _share(head: LocalRayHead | None, *extra: int) -> CpuShare | None:
    if head is None or head.temp_dir is None:
        return None
    return CpuShare(str(head.temp_dir), extra)


def drop_and_wait(
    ray: RayJobsAdapter, jobs: int, folder: Path, queue: str, counted: list[int] | None = None
) -> float:
    """Drop the jobs' specs at once; seconds from then until the last one ended, by Ray's
    `end_time` (`counted` gets the listings this watch sent)."""
    start = time.time()
    for i in range(jobs):
        drop(folder, f"job{i:04d}", spec_text(ENTRYPOINT, cpu=1))
    while True:
        time.sleep(WATCH_SECONDS)
        if counted is not None:
            counted.append(1)
        ours = [j for j in ray.list_jobs() if j.metadata.get(META_QUEUE) == queue]
        if len(ours) == jobs and all(j.terminal for j in ours):
            forget(ray, ours)
            return _last_end(ours, lambda j: True) - start


# Each run's jobs, kept for the table of where the time goes (gaps), then deleted from Ray.
RUN_JOBS: list[RayJob] = []


def forget(ray: RayAdapter, jobs: Sequence[RayJob]) -> None:
    """Keep a finished run's jobs here and delete them from Ray, so that every run starts at
    the same short history: a listing costs the dashboard a little per job it holds
    (benchmarks/requestcost.py), and side A's client lists ten times a second, so a history
    that grew over the rounds would slow the later rounds' A runs more than their B runs."""
    RUN_JOBS.extend(jobs)
    for job in jobs:
        with contextlib.suppress(JobNotFound):
            ray.delete(job.submission_id)


def _last_end(jobs: Iterable[RayJob], mine: Callable[[RayJob], bool]) -> float:
    """When the last of a run's jobs ended, by Ray's clock (time.time() on this machine)."""
    return max(j.end_time or 0.0 for j in jobs if mine(j))


def side_b(ray: RayJobsAdapter, jobs: int, folder: Path) -> float:
    """rayqueue in this process: the loop and watcher `serve` builds, through assembly."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = common.serve_settings(folder, "--queue-id", f"tp-{uuid.uuid4().hex[:8]}")
    rec = common.serve_loop(settings, ray)
    stop = threading.Event()
    threads = start_loop(rec, stop)
    time.sleep(0.5)
    try:
        return drop_and_wait(ray, jobs, folder, settings.resolved_queue_id)
    finally:
        stop.set()
        rec.wake.set()
        threads.join(10)


# serve's own times, from its log (asctime, local time): queue -> (ends seen, submits accepted)
SERVE_TIMES: dict[str, tuple[list[float], list[float]]] = {}
_LOGGED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO rayqueue\S*: (\w+) ")


def serve_times(log: Path) -> tuple[list[float], list[float]]:
    """When serve logged each run's end ("succeeded X (job ...)") and each submission Ray
    accepted ("submitted X ..."), sorted."""
    ends, submits = [], []
    for line in log.read_text(errors="replace").splitlines():
        found = _LOGGED.match(line)
        if found is None:
            continue
        at = time.mktime(time.strptime(found[1], "%Y-%m-%d %H:%M:%S")) + int(found[2]) / 1000
        if found[3] in ("succeeded", "failed"):
            ends.append(at)
        elif found[3] == "submitted":
            submits.append(at)
    return sorted(ends), sorted(submits)


def side_b_served(
    ray: RayJobsAdapter,
    jobs: int,
    folder: Path,
    address: str,
    flags: Sequence[str] = (),
    head: LocalRayHead | None = None,
) -> float:
    """rayqueue as users run it: a `rayqueue serve` process on the folder, same head. With
    `head`, the run's breakdown goes to BREAKDOWN."""
    folder.mkdir(parents=True, exist_ok=True)
    queue = f"tp-{uuid.uuid4().hex[:8]}"
    log = folder.parent / f"{folder.name}.serve.log"
    with served.serve_process(address, folder, log, *flags, queue_id=queue) as serve:
        time.sleep(1.0)  # its first pass is done and its watcher armed
        share = _share(head, serve.pid)
        before = _ray_calls(serve.url) if share is not None else {}
        watched: list[int] = []
        cpu0 = time.thread_time()
        with share or contextlib.nullcontext():
            seconds = drop_and_wait(ray, jobs, folder, queue, watched)
        if share is not None:
            after = _ray_calls(serve.url)
            cpu = {"benchmark's watch": time.thread_time() - cpu0, **share.totals()}
            requests = {
                "watch list_jobs": len(watched),
                **{f"serve {k}": v - before.get(k, 0.0) for k, v in after.items()},
            }
            BREAKDOWN.append({"side": "B", "seconds": seconds, "cpu": cpu, "requests": requests})
    SERVE_TIMES[queue] = serve_times(log)
    return seconds


def _ray_calls(url: str) -> dict[str, float]:
    """serve's calls to the dashboard so far, by call (rayqueue_ray_calls_total)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        text = response.read().decode()
    calls: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "rayqueue_ray_calls_total":
                call = sample.labels["call"]
                calls[call] = calls.get(call, 0.0) + sample.value
    return calls


def gaps(jobs: Sequence[RayJob], slots: int) -> list[dict[str, object]]:
    """Where each run's time goes, from Ray's own times: per run (a side A batch by its tag,
    a side B queue), the median time from a job's end to the submission that took its slot
    (the i-th submission fills the slot of the (i - slots)-th end) and the median time from a
    job's submission to its end (Ray's part: supervisor, driver, `true`)."""
    runs: dict[str, list[RayJob]] = {}
    for job in jobs:
        key = job.metadata.get("bench") or job.metadata.get(META_QUEUE)
        if key and job.start_time is not None and job.end_time is not None:
            runs.setdefault(key, []).append(job)
    rows = []
    for key, members in sorted(runs.items(), key=lambda kv: min(j.start_time or 0 for j in kv[1])):
        submitted = sorted(j.start_time or 0.0 for j in members)
        ended = sorted(j.end_time or 0.0 for j in members)
        refill = [submitted[i] - ended[i - slots] for i in range(slots, len(submitted))]
        # Through serve, the refill split at serve's log: the end seen, the submit accepted.
        seen, accepted = SERVE_TIMES.get(key, ([], []))
        noticed = [seen[i] - ended[i] for i in range(min(len(seen), len(ended)))]
        passed = [
            accepted[i] - seen[i - slots]
            for i in range(slots, min(len(accepted), len(seen) + slots))
        ]
        rows.append(
            {
                "run": ("A " if "bench" in members[0].metadata else "B ") + key,
                "jobs": len(members),
                "end_to_next_submit_ms": 1000 * statistics.median(refill) if refill else 0.0,
                "end_to_seen_ms": 1000 * statistics.median(noticed) if noticed else float("nan"),
                "seen_to_submitted_ms": 1000 * statistics.median(passed)
                if passed
                else float("nan"),
                "submit_to_end_ms": 1000
                * statistics.median((j.end_time or 0) - (j.start_time or 0) for j in members),
                "span_s": ended[-1] - submitted[0],
            }
        )
    return rows


def breakdown_table(runs: Sequence[dict[str, object]]) -> str:
    """Per side, the median over its runs of each kind's CPU seconds and of each request
    count (a run's kind that did not appear counts 0)."""
    lines = []
    for side in ("A", "B"):
        mine = [r for r in runs if r["side"] == side]
        if not mine:
            continue
        seconds = statistics.median(float(str(r["seconds"])) for r in mine)
        lines.append(f"side {side}: {len(mine)} runs, median {seconds:.1f} s")
        for what in ("cpu", "requests"):
            values: list[dict[str, float]] = [r[what] for r in mine]  # type: ignore[misc]
            keys = sorted({k for v in values for k in v})
            medians = {k: statistics.median(v.get(k, 0.0) for v in values) for k in keys}
            for k, m in sorted(medians.items(), key=lambda kv: -kv[1]):
                unit = "s CPU" if what == "cpu" else "requests"
                lines.append(f"  {what:8} {k:28} {m:8.2f} {unit}")
        total = statistics.median(sum(v for v in r["cpu"].values()) for r in mine)  # type: ignore[attr-defined]
        lines.append(f"  cpu      {'(all of the above)':28} {total:8.2f} s CPU")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=16, help="jobs per run; each side runs twice")
    parser.add_argument("--cpus", type=int, default=4, help="CPUs of the private Ray head")
    parser.add_argument(
        "--via",
        choices=("serve", "in-process"),
        default="serve",
        help="side B: a `rayqueue serve` process (default) or the same loop in this process",
    )
    parser.add_argument(
        "--address", default=None, help="use this Ray dashboard instead of starting a private head"
    )
    parser.add_argument(
        "--serve-args",
        default="",
        help="more arguments for `rayqueue serve` (side B through serve), e.g. '--interval 0.5'",
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="ABBA rounds (default 5): the median and spread"
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="per run, the private head's CPU per kind of process and each side's requests",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    flags = shlex.split(args.serve_args)
    head = LocalRayHead() if args.address is None else None
    tmp = ""
    rounds: list[tuple[float, float, float, float]] = []
    try:
        address = args.address if head is None else head.start(num_cpus=args.cpus)
        ray = RayJobsAdapter(address)
        tmp = tempfile.mkdtemp(prefix="rq-tp-")
        side_a(ray, min(args.jobs, 2), args.cpus)  # warm-up: first job start is slow
        for r in range(args.rounds):
            # A, B, B, A: Ray slows down a little as its job history grows, so an ABBA order
            # cancels that drift instead of charging it all to the side that runs second.
            watched = head if args.breakdown else None
            a1 = side_a(ray, args.jobs, args.cpus, watched)
            b1, b2 = (
                side_b_served(ray, args.jobs, Path(tmp) / f"tasks-{r}-{i}", address, flags, watched)
                if args.via == "serve"
                else side_b(ray, args.jobs, Path(tmp) / f"tasks-{r}-{i}")
                for i in (1, 2)
            )
            a2 = side_a(ray, args.jobs, args.cpus, watched)
            rounds.append((a1, b1, b2, a2))
            print(f"round {r + 1}: A1 B1 B2 A2 = {a1:.1f} {b1:.1f} {b2:.1f} {a2:.1f} s", flush=True)
        split = gaps(RUN_JOBS, args.cpus)
        print(
            table(
                "where the time goes, per run (Ray's times)",
                list(split[0]),
                [list(r.values()) for r in split],
            )
        )
    finally:
        if head is not None:
            head.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    # Each round's ratio (A1 + A2) / (B1 + B2); the median of the rounds, and their spread.
    ratios = sorted((a1 + a2) / (b1 + b2) for a1, b1, b2, a2 in rounds)
    a = statistics.median((a1 + a2) / 2 for a1, _, _, a2 in rounds)
    b = statistics.median((b1 + b2) / 2 for _, b1, b2, _ in rounds)
    row = {
        "jobs": args.jobs,
        "cpus": args.cpus,
        "side_b": args.via,
        "serve_args": args.serve_args,
        "rounds": len(rounds),
        "raw_jobs_per_s": args.jobs / a,
        "rayqueue_jobs_per_s": args.jobs / b,
        "ratio_b_over_a": statistics.median(ratios),
        "ratio_min": ratios[0],
        "ratio_max": ratios[-1],
        "seconds_a1_b1_b2_a2": [[round(x, 2) for x in r] for r in rounds],
    }
    print(table("throughput against raw Ray", list(row), [list(row.values())]))
    if BREAKDOWN:
        row["breakdown"] = BREAKDOWN
        print(breakdown_table(BREAKDOWN))
    print(f"results: {save('throughput', {'rows': [row]}, args.out)}")


if __name__ == "__main__":
    tune_gc()  # as serve's daemon does; not in main(), which tests call in-process
    main()
