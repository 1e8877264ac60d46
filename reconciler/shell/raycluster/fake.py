"""An in-memory RayAdapter for fast tests and benchmarks, faithful to Ray's observable rules."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from enum import Enum
from typing import Literal

from reconciler.shell.raycluster.logtail import LogRead, last_lines, read_tail
from specs.cluster import (
    FAILED,
    PENDING,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    TERMINAL_STATUSES,
    Available,
    Capacity,
    Census,
    CensusUnsupported,
    Holdings,
    JobConflict,
    JobNotFound,
    RayJob,
    RayRequestError,
    RayUnavailable,
    SubmitRequest,
    TailLimits,
    Usage,
)
from specs.task import submission_ids

METHODS = frozenset(
    {
        "list_jobs",
        "capacity",
        "submit",
        "stop",
        "delete",
        "logs",
        "log_tail",
        "job_info",
        "tail_logs",
        "take_census",
        "holdings_of",
    }
)

# The messages Ray 2.60 shows for each status, so status text in sidecars looks the same.
_MESSAGES = {
    PENDING: "Job has not started yet.",
    RUNNING: "Job is currently running.",
    SUCCEEDED: "Job finished successfully.",
    FAILED: "Job entrypoint command failed.",
    STOPPED: "Job was intentionally stopped.",
}
_NEXT_STEP = {PENDING: RUNNING, RUNNING: SUCCEEDED}
# The driver exit code Ray reports when a job reaches a status by itself.
_EXIT_CODES = {SUCCEEDED: 0, FAILED: 1}


class _Default(Enum):
    """`exit_code` not given (None is a value: the driver never ran, or was stopped)."""

    EXIT_CODE = 0


class FakeRay:
    """A Ray cluster in a dict.

    Like Ray, `start_time` is the submission time (Ray does not update it when the job
    starts running) and `end_time` is set when the job reaches a terminal status.

    - `available = False` makes every call raise RayUnavailable (the call is still counted).
    - `fail_next(method, exc)` makes the next call of `method` raise `exc`; failures queue up.
    - `auto_advance = True`: each list_jobs() returns the current state, then moves every
      job one step PENDING -> RUNNING -> SUCCEEDED, so a loop sees each status once.
    - `async_stop = True`: stop() only records the request, and the job turns STOPPED at the
      next list_jobs(), as on a real cluster where stopping takes seconds.
    - `hold(submission_id, ...)` and `set_holdings(...)` say what a job holds, as a census
      (`take_census`) reports it; a job that has ended holds nothing, as when Ray reclaims
      its workers. `census_supported = False`: a Ray without the state API.

    Each submitted job gets a Ray job id at once ("02000000", "03000000", ...: the
    dashboard's own job is the first), where Ray gives it when the driver starts.
    """

    def __init__(
        self,
        capacity: Capacity = Capacity(4, 0, 16 * 2**30),  # noqa: B008 - frozen, safe to share
        *,
        clock: Callable[[], float] = time.time,
        auto_advance: bool = False,
        async_stop: bool = False,
    ) -> None:
        self.cluster_capacity = capacity
        self.clock = clock
        self.auto_advance = auto_advance
        self.async_stop = async_stop
        self.available = True
        self.jobs: dict[str, RayJob] = {}
        self.job_logs: dict[str, str] = {}
        self.submitted: list[SubmitRequest] = []
        self.stop_requested: set[str] = set()
        self.calls: Counter[str] = Counter()
        # What each Ray job holds (by job id) and each submitted job's supervisor reserves
        # (by submission id), as take_census reports them.
        self.holdings: dict[str, Holdings] = {}
        self.entrypoints: dict[str, Capacity] = {}
        self.census_supported = True
        self.census_whole = True
        self._next_job = 2
        self._failures: dict[str, deque[Exception]] = {}
        # Re-entrant so test hooks may be called from inside other fake methods.
        self._lock = threading.RLock()

    # --- test hooks -----------------------------------------------------------------------

    def fail_next(self, method: str, exc: Exception) -> None:
        """Make the next call of `method` raise `exc` (and do nothing else)."""
        if method not in METHODS:
            raise ValueError(f"FakeRay has no method {method!r}")
        with self._lock:
            self._failures.setdefault(method, deque()).append(exc)

    def set_status(
        self,
        submission_id: str,
        status: str,
        *,
        now: float | None = None,
        message: str = "",
        exit_code: int | Literal[_Default.EXIT_CODE] | None = _Default.EXIT_CODE,
    ) -> RayJob:
        """Move a job to `status`, setting end_time for terminal ones as Ray does.

        `exit_code` is the driver's; by default 0 for SUCCEEDED and 1 for FAILED, as a driver
        that ran and ended would report, and None otherwise (a stopped job has none).
        """
        code = _EXIT_CODES.get(status) if exit_code is _Default.EXIT_CODE else exit_code
        with self._lock:
            job = self._get(submission_id)
            t = self.clock() if now is None else now
            job = replace(
                job,
                status=status,
                message=message or _MESSAGES.get(status, ""),
                start_time=job.start_time if job.start_time is not None else t,
                end_time=t if status in TERMINAL_STATUSES else None,
                exit_code=code,
            )
            self.jobs[submission_id] = job
            if status in TERMINAL_STATUSES:
                self.stop_requested.discard(submission_id)
            return job

    def set_logs(self, submission_id: str, text: str) -> None:
        with self._lock:
            self._get(submission_id)
            self.job_logs[submission_id] = text

    def add_job(self, job: RayJob, logs: str = "") -> None:
        """Put a job in directly, e.g. a foreign job without our metadata."""
        with self._lock:
            self.jobs[job.submission_id] = job
            self.job_logs[job.submission_id] = logs

    def hold(
        self,
        submission_id: str,
        *,
        groups: Capacity = Capacity(),  # noqa: B008 - frozen, safe to share
        actors: Capacity = Capacity(),  # noqa: B008
        tasks: Capacity = Capacity(),  # noqa: B008
        complete: bool = True,
        usage: Usage | None = None,
    ) -> Holdings:
        """Say what a submitted job holds from now on (replacing what it held)."""
        with self._lock:
            job_id = self._get(submission_id).job_id
            if job_id is None:
                raise ValueError(f"{submission_id} has no Ray job id")
            held = Holdings(job_id, groups, actors, tasks, complete, usage)
            self.holdings[job_id] = held
            return held

    def set_holdings(self, held: Holdings) -> None:
        """Say what any Ray job holds by its job id (a foreign driver's, say)."""
        with self._lock:
            self.holdings[held.job_id] = held

    def clear(self) -> None:
        """Forget every job, as a head restarted without fault tolerance would."""
        with self._lock:
            self.jobs.clear()
            self.job_logs.clear()
            self.stop_requested.clear()

    # --- the RayAdapter protocol ----------------------------------------------------------

    def list_jobs(self) -> Sequence[RayJob]:
        with self._lock:
            self._enter("list_jobs")
            for sid in sorted(self.stop_requested):
                if sid in self.jobs and not self.jobs[sid].terminal:
                    self.set_status(sid, STOPPED)
            self.stop_requested.clear()
            snapshot = [replace(j, metadata=dict(j.metadata)) for j in self.jobs.values()]
            if self.auto_advance:
                for sid, job in list(self.jobs.items()):
                    if job.status in _NEXT_STEP:
                        self.set_status(sid, _NEXT_STEP[job.status])
            return snapshot

    def capacity(self) -> Capacity:
        with self._lock:
            self._enter("capacity")
            return self.cluster_capacity

    def submit(self, request: SubmitRequest) -> None:
        with self._lock:
            self._enter("submit")
            sid = request.submission_id
            refused = submission_ids.unsubmittable(sid)
            if refused is not None:  # as RayJobsAdapter refuses it, before asking Ray
                raise RayRequestError(f"not submitted: {refused}")
            if sid in self.jobs:
                raise JobConflict(f"a job with submission id {sid} already exists")
            self.submitted.append(request)
            self.jobs[sid] = RayJob(
                submission_id=sid,
                status=PENDING,
                entrypoint=request.entrypoint,
                message=_MESSAGES[PENDING],
                start_time=self.clock(),
                metadata=dict(request.metadata),
                job_id=self._next_job.to_bytes(4, "little").hex(),
            )
            self._next_job += 1
            self.job_logs[sid] = ""

    def stop(self, submission_id: str) -> None:
        with self._lock:
            self._enter("stop")
            job = self._get(submission_id)
            if job.terminal:
                return
            if self.async_stop:
                self.stop_requested.add(submission_id)
            else:
                self.set_status(submission_id, STOPPED)

    def delete(self, submission_id: str) -> None:
        with self._lock:
            self._enter("delete")
            job = self._get(submission_id)
            if not job.terminal:
                raise RayRequestError(
                    f"cannot delete job {submission_id}: it is in a non-terminal state {job.status}"
                )
            del self.jobs[submission_id]
            self.job_logs.pop(submission_id, None)

    def logs(self, submission_id: str) -> str:
        with self._lock:
            self._enter("logs")
            self._get(submission_id)
            return self.job_logs.get(submission_id, "")

    def log_tail(self, submission_id: str, limits: TailLimits) -> str:
        """As RayJobsAdapter reads it: the last lines as Ray's log agent finds them, each read
        stopped at its budget (logtail.read_tail)."""
        with self._lock:
            self._enter("log_tail")
            self._get(submission_id)
            data = self.job_logs.get(submission_id, "").encode("utf-8", "surrogatepass")

        def read(lines: int, budget: int) -> LogRead:
            found = last_lines(data, lines)
            return LogRead(found[:budget], len(found) <= budget)

        return read_tail(read, limits)

    # --- the CensusReader protocol --------------------------------------------------------

    def take_census(self, drivers: Mapping[tuple[str, int], str] | None = None) -> Census:
        """What `hold` and `set_holdings` said, for every job that has not ended (and every
        job id no submitted job has: a foreign driver's); each live job's supervisor
        reserves what `entrypoints` says, else nothing; Ray reports available the capacity
        less all of it. The fake has no processes: a
        driver's use is in what `hold` says."""
        del drivers
        with self._lock:
            self._enter("take_census")
            if not self.census_supported:
                raise CensusUnsupported("fake Ray has no state API")
            ended = {j.job_id for j in self.jobs.values() if j.terminal and j.job_id}
            live = [j for j in self.jobs.values() if not j.terminal]
            held = {k: h for k, h in self.holdings.items() if k not in ended}
            reserved = {
                j.submission_id: self.entrypoints.get(j.submission_id, Capacity()) for j in live
            }
            taken = sum((h.logical for h in held.values()), Capacity())
            taken = sum(reserved.values(), taken)
            now = self.clock()
            return Census(
                now,
                held,
                reserved,
                whole=self.census_whole,
                physical=any(h.usage is not None for h in held.values()),
                available=Available(_floored(self.cluster_capacity - taken), now),
                requests=3,
            )

    def holdings_of(self, submission_id: str) -> Holdings | None:
        """What `hold` said of the job (nothing once it has ended), as RayJobsAdapter reads
        one job's holdings."""
        with self._lock:
            self._enter("holdings_of")
            if not self.census_supported:
                raise CensusUnsupported("fake Ray has no state API")
            job = self._get(submission_id)
            if job.job_id is None:
                return None
            held = self.holdings.get(job.job_id)
            if held is None or job.terminal:
                return Holdings(job.job_id)
            return replace(held, usage=None)

    # --- extras of RayJobsAdapter ---------------------------------------------------------

    def job_info(self, submission_id: str) -> RayJob:
        with self._lock:
            self._enter("job_info")
            job = self._get(submission_id)
            return replace(job, metadata=dict(job.metadata))

    def tail_logs(self, submission_id: str) -> Iterator[str]:
        """The stored log in one chunk (the fake's jobs do not produce output over time)."""
        with self._lock:
            self._enter("tail_logs")
            self._get(submission_id)
            text = self.job_logs.get(submission_id, "")
        return iter([text] if text else [])

    # --- internals ------------------------------------------------------------------------

    def _enter(self, method: str) -> None:
        self.calls[method] += 1
        if not self.available:
            raise RayUnavailable(f"fake Ray is unavailable ({method})")
        queued = self._failures.get(method)
        if queued:
            raise queued.popleft()

    def _get(self, submission_id: str) -> RayJob:
        try:
            return self.jobs[submission_id]
        except KeyError:
            raise JobNotFound(f"Ray has no job {submission_id}") from None


def _floored(amount: Capacity) -> Capacity:
    """Nothing below zero: Ray reports no negative availability."""
    return Capacity(max(amount.cpu, 0.0), max(amount.gpu, 0.0), max(amount.memory, 0.0))
