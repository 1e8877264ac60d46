"""What the planner is told Ray's jobs hold: the latest census joined to Ray's job listing.

The planner keys what each job holds by submission id (Observation.held) and caps its free
room at what Ray reports available (Observation.ray_available). The census keys holdings by
Ray's job id, and is taken on a thread of its own, so it is older than the listing: a job is
given its census holdings only when the census could have seen all of it, else it is left
out (not observed), and the planner charges it what it declares and takes its charge off
what Ray reported available. A census too old to trust gives nothing: the queue then counts
what specs declare, as without one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from specs.cluster import Capacity, Census, RayJob

log = logging.getLogger("rayqueue.loop")

# A census older than this many census intervals is not trusted.
STALE_INTERVALS = 3


@dataclass(frozen=True)
class InRay:
    """What Ray says each job holds, by submission id (a driver Ray lists no submitted job
    for: by its Ray job id), and what Ray reported available when it was read (None: not
    read)."""

    held: Mapping[str, Capacity] = field(default_factory=dict)
    ray_available: Capacity | None = None


NOTHING = InRay()


def in_ray(census: Census | None, jobs: Mapping[str, RayJob], now: float, max_age: float) -> InRay:
    """The census joined to Ray's listing (`jobs`, by submission id), at `now`.

    A listed job with a Ray job id holds its census holdings and what its supervisor
    reserves for its driver; it is left out when the census is not whole and does not name
    it (its holdings are unknown), when it was submitted after the census (or after the
    availability report it read: what it holds would never come off Ray's report), and when
    it ended before. A job id the census names and no listed job has is a driver connected
    directly; it is kept when it holds something (the dashboard's own job holds nothing: its
    supervisors' reservations are their jobs'). A census older than `max_age`, or none,
    gives NOTHING."""
    if census is None or now - census.taken_at > max_age:
        return NOTHING
    available = census.available
    if available is not None and now - available.reported_at > max_age:
        available = None  # Ray's own report is stale: read no availability from it
    as_of = census.taken_at if available is None else min(census.taken_at, available.reported_at)
    held: dict[str, Capacity] = {}
    listed: set[str] = set()
    for sid, job in jobs.items():
        if job.job_id is None:
            continue
        listed.add(job.job_id)
        if job.start_time is None or job.start_time > as_of:
            continue
        if job.terminal and (job.end_time is None or job.end_time <= as_of):
            continue
        if not census.whole and job.job_id not in census.jobs:
            continue
        reserved = census.entrypoints.get(sid, Capacity())
        held[sid] = census.of(job.job_id).logical + reserved
    for job_id, holdings in census.jobs.items():
        if job_id in listed:
            continue
        amount = holdings.logical
        if amount != Capacity():
            held[job_id] = amount
    return InRay(held, available.resources if available is not None else None)


@dataclass(frozen=True)
class _Joined:
    """One join and what it was made of: the census and the listing (values their owners
    replace whole and never change), and whether Ray's report of what is available was
    read."""

    census: Census
    jobs: Mapping[str, RayJob]
    reads_available: bool
    found: InRay


class CensusJoin:
    """The join as the loop reads it each pass: `in_ray` of the poller's latest census, and
    a line in the log when a census that was fresh goes stale (or away), and when one is
    fresh again. The loop passes far more often than a census is taken, and its listing
    stays the same object while no job moves, so the last join is kept and given again
    while both are the same."""

    def __init__(self, interval_seconds: float) -> None:
        self.max_age = STALE_INTERVALS * interval_seconds
        self.fresh: bool | None = None  # None until a pass has read a fresh census
        self._last: _Joined | None = None

    def read(self, census: Census | None, jobs: Mapping[str, RayJob], now: float) -> InRay:
        stale = census is None or now - census.taken_at > self.max_age
        if stale and self.fresh:
            age = "gone" if census is None else f"{now - census.taken_at:.0f} s old"
            log.warning(
                "the census of what Ray jobs hold is %s (trusted up to %g s): admission "
                "counts what specs declare",
                age,
                self.max_age,
            )
            self.fresh = False
        elif not stale:
            if self.fresh is False:
                log.info("the census of what Ray jobs hold is fresh again: admission charges it")
            self.fresh = True
        if census is None or stale:
            return NOTHING
        available = census.available
        reads_available = available is not None and now - available.reported_at <= self.max_age
        last = self._last
        if (
            last is not None
            and last.census is census
            and last.jobs is jobs
            and last.reads_available == reads_available
        ):
            return last.found
        found = in_ray(census, jobs, now, self.max_age)
        self._last = _Joined(census, jobs, reads_available, found)
        return found
