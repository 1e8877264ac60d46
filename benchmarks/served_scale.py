"""`rayqueue serve` as a process on a folder of N specs: start-up, idle CPU, RSS, Ray calls.

The folder has the shape of a busy queue: one long task (`sleep`) holds every CPU of the
head, and the N - 1 others wait, Queued. Nothing changes after that, so the process is as
idle as a queue with work can be. This is the costliest idle shape: while tasks wait and a
job runs, serve polls Ray every --interval (the plan has no earlier deadline) to see the job
end, and walks the whole folder every --rescan-interval (30 s), both of which the window holds.

Everything is read from outside the process: CPU time (utime + stime) and memory (VmRSS,
VmHWM) from /proc, passes and Ray calls from serve's own /metrics.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from benchmarks import bigfolder, procstat
from benchmarks.common import spec_text, write_before_start
from benchmarks.served import serve_process, wait
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_QUEUE

BLOCKER = "a-blocker"
# Ray's job driver for `sleep` lives as long as this; the benchmark stops it when done.
BLOCKER_ENTRYPOINT = "sleep 3600"


def write_folder(folder: Path, size: int, cpus: float) -> None:
    """One task that takes the whole head, and size - 1 that wait behind it: a copy of a
    prepared folder (benchmarks/bigfolder.py), so a large folder is quick to set up."""
    bigfolder.copy_of(size - 1, folder, levels=9)
    # The highest priority, so that the first pass admits it and nothing else fits.
    write_before_start(
        folder / f"{BLOCKER}.yaml", spec_text(BLOCKER_ENTRYPOINT, cpu=cpus, priority=9)
    )


@dataclass(frozen=True)
class Scrape:
    pending: float
    running: float
    passes: float
    ray_calls: float
    walks: float  # passes that walked the whole folder
    still: float  # passes that read nothing and did not plan
    deferred: float  # sidecar writes still waiting in memory


def scrape(url: str) -> Scrape | None:
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
            text = response.read().decode()
    except OSError:
        return None  # busy with a long first pass: ask again
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
            if sample.name == "rayqueue_passes_total":
                kind = f"rayqueue_passes_total:{sample.labels.get('kind')}"
                sums[kind] = sums.get(kind, 0.0) + sample.value
    return Scrape(
        pending=sums.get("rayqueue_pending_tasks", 0.0),
        running=sums.get("rayqueue_running_tasks", 0.0),
        passes=sums.get("rayqueue_pass_duration_seconds_count", 0.0),
        ray_calls=sums.get("rayqueue_ray_calls_total", 0.0),
        walks=sums.get("rayqueue_passes_total:walk", 0.0),
        still=sums.get("rayqueue_passes_total:still", 0.0),
        deferred=sums.get("rayqueue_deferred_status_writes", 0.0),
    )


def settled(url: str, size: int) -> Scrape | None:
    """The metrics once every task is accounted for (Queued, or the blocker running)."""
    found = scrape(url)
    if found is None or found.pending + found.running < size:
        return None
    return found


def measure(address: str, size: int, root: Path, window: float) -> dict[str, object]:
    ray = RayJobsAdapter(address)
    folder = root / f"served-{size}"
    write_folder(folder, size, ray.capacity().cpu)
    queue = f"scale-{size}-{uuid.uuid4().hex[:6]}"
    log = root / f"serve-{size}.log"
    # The first pass parses every spec and writes every sidecar, all before the API answers
    # quickly; on a large folder and a small machine that takes minutes, so allow for it.
    patience = 300 + 0.1 * size
    started = time.monotonic()
    try:
        with serve_process(address, folder, log, queue_id=queue, ready_timeout=patience) as srv:
            first = wait(lambda: settled(srv.url, size), patience, f"{size} tasks", every=0.5)
            ready_wall = time.monotonic() - started
            ready_cpu = procstat.cpu_seconds(srv.pid)
            # The first records of the waiting tasks, then their positions once the blocker
            # was admitted, are written status_write_budget per pass, a position no sooner
            # than position_write_seconds (10 s) after it changed: serve is not idle until
            # the backlog reads 0 twice, 12 s apart.
            while True:
                wait(lambda: _written(srv.url), patience, "every sidecar written", every=0.5)
                time.sleep(12)
                if _written(srv.url):
                    break
            written_wall = time.monotonic() - started
            written_cpu = procstat.cpu_seconds(srv.pid)
            time.sleep(min(5.0, window))
            before, cpu0, t0 = scrape(srv.url), procstat.cpu_seconds(srv.pid), time.monotonic()
            time.sleep(window)
            after, cpu1, t1 = scrape(srv.url), procstat.cpu_seconds(srv.pid), time.monotonic()
            memory = procstat.memory(srv.pid)
    finally:
        stop_ours(ray, queue)
    assert before is not None and after is not None, "serve's /metrics stopped answering"
    passes = after.passes - before.passes
    return {
        "specs": size,
        "serve_ready_s": ready_wall,
        "serve_ready_cpu_s": ready_cpu,
        "sidecars_written_s": written_wall,
        "sidecars_written_cpu_s": written_cpu,
        "idle_window_s": t1 - t0,
        "idle_cpu_pct_of_core": 100 * (cpu1 - cpu0) / (t1 - t0),
        "idle_passes_per_s": passes / (t1 - t0),
        "idle_ray_calls_per_pass": (after.ray_calls - before.ray_calls) / passes if passes else 0,
        "idle_still_share": (after.still - before.still) / passes if passes else 0,
        # Full walks are stretched to stay under rescan_cpu_share: a window may hold none.
        "idle_walks": after.walks - before.walks,
        "jobs_running": first.running,
        "rss_mb": memory.rss_mb,
        "peak_rss_mb": memory.peak_rss_mb,
    }


def _written(url: str) -> bool:
    found = scrape(url)
    return found is not None and found.deferred == 0


def stop_ours(ray: RayJobsAdapter, queue: str) -> None:
    """serve leaves running jobs alone when it exits (a restart must find them): stop ours."""
    for job in ray.list_jobs():
        if job.metadata.get(META_QUEUE) == queue and not job.terminal:
            ray.stop(job.submission_id)
