"""The census of what every Ray job holds, taken on a thread of its own at its own pace, off
the reconcile loop's path: the loop (and anything else) reads `CensusPoller.latest`, a plain
immutable value swapped whole, and never waits for a census.

What a census costs is counted in the process's registry: wall and CPU seconds, requests
and bytes read from the dashboard. A Ray that cannot say what its jobs hold (an older Ray, a
dashboard without the state API) is said once in the log; the queue then works on what specs
declare, as without a census.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from specs.cluster import (
    META_QUEUE,
    Capacity,
    Census,
    CensusReader,
    CensusUnsupported,
    RayError,
    RayJob,
    RayUnavailable,
)

log = logging.getLogger("rayqueue.census")

# A census reads a few lists from the dashboard: tens of milliseconds on a small cluster,
# seconds on a big one.
CENSUS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
RESULTS = ("ok", "unavailable", "unsupported", "error")
# Whose jobs hold what: this queue's (submitted by this rayqueue), and every other's.
OWNERS = ("queue", "foreign")
RESOURCES = ("cpu", "gpu", "memory")

Jobs = Callable[[], Mapping[str, RayJob] | None]


def held_by_owner(census: Census, jobs: Mapping[str, RayJob], queue_id: str) -> dict[str, Capacity]:
    """What this queue's jobs and all others hold in Ray's logical resources: each job's
    holdings and what its supervisor reserves for its driver. A job is this queue's when
    Ray's listing (`jobs`, by submission id) shows it with this queue's metadata; any other
    job (another client's, a driver that called ray.init, a job Ray has not listed yet) is
    foreign."""
    ours = {
        job.job_id: sid
        for sid, job in jobs.items()
        if job.job_id is not None and job.metadata.get(META_QUEUE) == queue_id
    }
    held = {owner: Capacity() for owner in OWNERS}
    for job_id, holdings in census.jobs.items():
        owner = "queue" if job_id in ours else "foreign"
        held[owner] += holdings.logical
    for sid, reserved in census.entrypoints.items():
        job = jobs.get(sid)
        owner = (
            "queue" if job is not None and job.metadata.get(META_QUEUE) == queue_id else "foreign"
        )
        held[owner] += reserved
    return held


def drivers_of(jobs: Mapping[str, RayJob]) -> dict[tuple[str, int], str]:
    """The Ray job id of each live job's driver process, by its node's id and pid."""
    return {
        (job.driver_node_id, job.driver_pid): job.job_id
        for job in jobs.values()
        if not job.terminal and job.job_id and job.driver_node_id and job.driver_pid
    }


class CensusMetrics:
    """What the censuses cost and how they ended, registered in the process's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.duration = Histogram(
            "rayqueue_census_duration_seconds",
            "Wall time of one census of what every Ray job holds (its own thread, off the "
            "reconcile loop)",
            buckets=CENSUS_BUCKETS,
            registry=registry,
        )
        self.cpu = Counter(
            "rayqueue_census_cpu_seconds",
            "CPU time serve spent taking censuses (the census thread's own)",
            registry=registry,
        )
        self.requests = Counter(
            "rayqueue_census_requests",
            "Requests the censuses sent to the Ray dashboard",
            registry=registry,
        )
        self.bytes = Counter(
            "rayqueue_census_bytes",
            "Bytes of the dashboard's answers the censuses read",
            registry=registry,
        )
        self.last_requests = Gauge(
            "rayqueue_census_last_requests",
            "Requests the last census sent to the Ray dashboard",
            registry=registry,
        )
        self.last_bytes = Gauge(
            "rayqueue_census_last_bytes",
            "Bytes of the dashboard's answers the last census read",
            registry=registry,
        )
        self.polls = Counter(
            "rayqueue_census_polls",
            "Censuses by how they ended: ok, unavailable (Ray did not answer), unsupported "
            "(this Ray cannot say what its jobs hold), error",
            ["result"],
            registry=registry,
        )
        self.jobs = Gauge(
            "rayqueue_census_jobs",
            "Ray jobs (ours and foreign) the last census found holding resources",
            registry=registry,
        )
        self.whole = Gauge(
            "rayqueue_census_whole",
            "1 if every list of the last census came whole (no job's figures are a lower "
            "bound), else 0",
            registry=registry,
        )
        self.held = Gauge(
            "rayqueue_census_held",
            "Logical resources Ray jobs hold as the last census saw them (placement groups, "
            "actors and running tasks, and what supervisors reserve for drivers; memory in "
            "bytes), by owner: queue (this rayqueue's jobs) or foreign (every other job); "
            "compare rayqueue_cluster_reserved, what this queue's tasks are charged",
            ["owner", "resource"],
            registry=registry,
        )
        for result in RESULTS:
            self.polls.labels(result)

    def observe(self, census: Census, wall: float, cpu: float) -> None:
        self.duration.observe(wall)
        self.cpu.inc(cpu)
        self.requests.inc(census.requests)
        self.bytes.inc(census.bytes_read)
        self.last_requests.set(census.requests)
        self.last_bytes.set(census.bytes_read)
        self.jobs.set(len(census.jobs))
        self.whole.set(1 if census.complete else 0)

    def observe_owners(self, held: Mapping[str, Capacity]) -> None:
        for owner, amount in held.items():
            for resource in RESOURCES:
                self.held.labels(owner, resource).set(getattr(amount, resource))


class CensusPoller:
    """Takes a census every `interval_seconds` on its own thread (`start`), or one at each
    `take()`. `latest` is the last census taken: None before the first, and while Ray
    cannot say (CensusUnsupported); kept through a failure to reach Ray, where its
    `taken_at` says how old it is."""

    def __init__(
        self,
        reader: CensusReader,
        interval_seconds: float,
        metrics: CensusMetrics | None = None,
        *,
        cpu_clock: Callable[[], float] = time.thread_time,
        wall_clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.reader = reader
        self.interval_seconds = interval_seconds
        self.metrics = metrics
        self.cpu_clock = cpu_clock
        self.wall_clock = wall_clock
        self.latest: Census | None = None
        # Ray's jobs as the loop last listed them, and its queue id (`follow`): whose jobs
        # hold what, for the metrics.
        self.jobs: Jobs | None = None
        self.queue_id = ""
        self.supported: bool | None = None  # None until Ray has answered once
        self.failing = False  # a failure is said once, until a census succeeds again

    def __repr__(self) -> str:
        return f"CensusPoller({self.reader!r}, every {self.interval_seconds:g} s)"

    def follow(self, jobs: Jobs, queue_id: str) -> None:
        """Tell this queue's jobs from foreign ones by Ray's listing as `jobs()` answers it
        (the loop's last, a mapping it replaces whole and never changes)."""
        self.jobs, self.queue_id = jobs, queue_id

    def take(self) -> Census | None:
        """One census now; the new `latest`. Never raises what Ray raises: it logs it, once
        for a run of failures of one kind."""
        wall, cpu = self.wall_clock(), self.cpu_clock()
        listed = self.jobs() if self.jobs is not None else None
        try:
            census = self.reader.take_census(drivers_of(listed) if listed is not None else None)
        except CensusUnsupported as exc:
            self._count("unsupported")
            self.latest = None
            if self.supported is not False:
                log.warning(
                    "%s: rayqueue cannot see what each Ray job holds, and counts what specs "
                    "declare",
                    exc,
                )
            self.supported = False
            return None
        except RayError as exc:
            self._count("unavailable" if isinstance(exc, RayUnavailable) else "error")
            if not self.failing:
                log.warning("the census of what Ray jobs hold failed: %s", exc)
            self.failing = True
            return self.latest
        if self.metrics is not None and listed is not None:
            self.metrics.observe_owners(held_by_owner(census, listed, self.queue_id))
        if self.metrics is not None:
            self.metrics.observe(census, self.wall_clock() - wall, self.cpu_clock() - cpu)
        self._count("ok")
        if self.failing or self.supported is False:
            log.info("the census of what Ray jobs hold works again")
        self.failing = False
        self.supported = True
        self.latest = census
        return census

    def run(self, stop: threading.Event) -> None:
        """Take a census every interval until `stop` is set; the first at once."""
        while not stop.is_set():
            try:
                self.take()
            except Exception:
                # A census is never worth the thread: the next one may read another answer.
                self._count("error")
                if not self.failing:
                    log.exception("the census of what Ray jobs hold failed")
                self.failing = True
            stop.wait(self.interval_seconds)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(
            target=self.run, args=(stop,), name="rayqueue-census", daemon=True
        )
        thread.start()
        return thread

    def _count(self, result: str) -> None:
        if self.metrics is not None:
            self.metrics.polls.labels(result).inc()
