"""Ray's jobs as the loop sees them: a full listing at least every `resync_seconds`, and in
the fast polls between, a look-up of the few jobs that can change.

While tasks wait on running jobs the loop asks Ray about ten times a second, to see a job end at
once. Ray's listing holds its whole history (every job it still keeps), so parsing it every poll
costs more the longer Ray runs (on a busy head, most of serve's CPU). Between two listings only a
live job (pending or running) or one the loop has just submitted can change in a way that matters
before the next listing, so only those are looked up, each by its id. What else could change (a job
another client submitted or deleted) is seen at the next listing, as every listing is a full read:
level-triggered, with the resync as its period. The view is never changed in place: a changed answer
makes a new mapping, so an unchanged one is the very object the last pass planned from (cheap to
compare).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Protocol, runtime_checkable

from specs.cluster import RayAdapter, RayJob

# Look jobs up by id while they are few beside the listing: a look-up is one request, a listed
# job some parsing, and one request costs serve as much as parsing a few dozen listed jobs.
LOOKUPS_PER_LISTED_JOB = 1 / 32
# And while they are few at all, whatever the listing: the adapter sends this many look-ups together
# (RayJobsAdapter.look_up_jobs), so they take one round trip to the dashboard, while a listing's
# wait grows with Ray's history. Seeing an end sooner is what lets a refill through the queue keep
# up with a client that submits directly (docs/benchmarks.md); it costs a little more CPU a poll
# than a short listing would.
LOOKUPS_ANYWAY = 8
# But a look-up costs the dashboard about as much as listing a few jobs (Ray 2.60's job head
# asks the GCS and its KV store for each, where a listing costs a fixed part and a little per
# job; docs/benchmarks.md): while the listing is at most this many jobs per job to look up, the
# poll lists, one request in place of several, and the listing is a full read besides.
LISTED_JOBS_PER_LOOKUP = 2


@runtime_checkable
class JobLookup(Protocol):
    """An adapter that can tell single jobs' states (RayJobsAdapter.look_up_jobs)."""

    def look_up_jobs(self, submission_ids: Iterable[str]) -> Mapping[str, RayJob | None]: ...


class JobView:
    """The jobs last read: the last listing, updated by look-ups. Raises what the adapter
    raises (RayError); after one, call `drop()`, and the next read lists again."""

    def __init__(self, resync_seconds: float) -> None:
        self.resync_seconds = resync_seconds
        self.jobs: Mapping[str, RayJob] | None = None
        self.listed_at = -math.inf
        self.fresh: set[str] = set()  # submitted since the last listing: looked up too
        self.listings = self.lookups = 0  # reads of each kind (for tests and benchmarks)

    def read(self, ray: RayAdapter, now: float) -> Mapping[str, RayJob]:
        jobs = self.jobs
        if (
            jobs is None
            or not isinstance(ray, JobLookup)
            or not 0 <= now - self.listed_at < self.resync_seconds
        ):
            return self._list(ray, now)
        watch = {sid for sid, job in jobs.items() if not job.terminal} | self.fresh
        if len(watch) > max(LOOKUPS_ANYWAY, LOOKUPS_PER_LISTED_JOB * len(jobs)):
            return self._list(ray, now)
        if watch and len(jobs) <= LISTED_JOBS_PER_LOOKUP * len(watch):
            return self._list(ray, now)  # a short listing: cheaper than the look-ups
        if not watch:
            return jobs
        self.lookups += 1
        answers = ray.look_up_jobs(sorted(watch))
        self.fresh.clear()  # each is now in the view (and watched while live), or gone
        new: dict[str, RayJob] | None = None
        for sid, job in answers.items():
            old = jobs.get(sid)
            if job is not None and old is not None:
                # A look-up does not tell what a job reserved for its entrypoint; that is
                # fixed when it is submitted, so the listing's figures stand.
                job = replace(
                    job,
                    entrypoint_cpus=old.entrypoint_cpus,
                    entrypoint_gpus=old.entrypoint_gpus,
                    entrypoint_memory=old.entrypoint_memory,
                )
            if job == old:
                continue
            if new is None:
                new = dict(jobs)
            if job is None:
                del new[sid]
            else:
                new[sid] = job
        if new is None:
            return jobs
        self.jobs = new
        return new

    def submitted(self, submission_ids: Iterable[str]) -> None:
        """Jobs the loop submitted: looked up from the next poll on (a refused one is simply
        not found)."""
        self.fresh.update(submission_ids)

    def deleted(self, submission_ids: Iterable[str]) -> None:
        """Jobs the loop deleted from Ray's history: gone from the view at once, so that the
        polls before the next listing do not plan their deletion again."""
        jobs = self.jobs
        gone = {sid for sid in submission_ids if jobs is not None and sid in jobs}
        if jobs is not None and gone:
            self.jobs = {sid: job for sid, job in jobs.items() if sid not in gone}

    def drop(self) -> None:
        """Forget the view (Ray failed to answer): the next read lists."""
        self.jobs = None
        self.fresh.clear()

    def _list(self, ray: RayAdapter, now: float) -> Mapping[str, RayJob]:
        self.listings += 1
        listed = {job.submission_id: job for job in ray.list_jobs()}
        self.jobs, self.listed_at = listed, now
        self.fresh.clear()
        return listed
