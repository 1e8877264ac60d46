"""The acting side of a pass: submit what the plan says, stop (once per run, resent only
after Ray's stop wait), drop finished jobs from Ray's history, fetch failed runs' log tails."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace
from datetime import datetime

from reconciler.core import planner
from reconciler.core.planner import Plan
from reconciler.core.resources import resources_text
from reconciler.core.task import lifecycle
from reconciler.core.task.jobs import request_of
from reconciler.shell.loop.faults import Faults
from reconciler.shell.loop.repeats import Repeating
from specs.cluster import (
    JobConflict,
    JobNotFound,
    RayAdapter,
    RayError,
    RayRequestError,
    RayUnavailable,
    TailLimits,
)
from specs.folder.store import TaskStore
from specs.task.records import Task
from specs.task.status import LOG_LINE_BYTES, LOG_TAIL_BYTES, TaskStatus
from specs.tenancy.policy import STOP_WAIT_ENV
from specs.tenancy.runtimepaths import RuntimePaths

log = logging.getLogger("rayqueue.loop")

RAY_STOP_WAIT = 3.0  # Ray's own wait between SIGTERM and SIGKILL when the job sets none
STOP_MARGIN = 10.0  # beyond a job's stop wait, before Ray still listing it means a lost stop


def stop_wait_of(runtime_env: Mapping[str, object] | None) -> float:
    """The stop wait Ray's supervisor will use for a job submitted with `runtime_env`."""
    env_vars = (runtime_env or {}).get("env_vars")
    value = env_vars.get(STOP_WAIT_ENV) if isinstance(env_vars, Mapping) else None
    try:
        return max(float(int(str(value).strip())), 0.0) if value is not None else RAY_STOP_WAIT
    except ValueError:
        return RAY_STOP_WAIT


class RayActions:
    """What a pass does to Ray, and the one thing it remembers doing: when each stop was sent
    (`stops_sent`, submission id -> wall clock; in memory: after a restart one stop is sent
    again, which is harmless). The adapter is handed in at each call."""

    def __init__(
        self,
        store: TaskStore,
        faults: Faults,
        paths: RuntimePaths,
        ray_down: Repeating,
        status_writes: Repeating,
    ) -> None:
        self.store = store
        self.faults = faults
        self.paths = paths
        self.ray_down = ray_down
        self.status_writes = status_writes
        self.stops_sent: dict[str, float] = {}
        # submission id -> the stop wait its job was submitted with (Ray's SIGTERM-to-SIGKILL
        # wait, from its runtime env): the resend of its stop waits for that, not a global one.
        self.stop_waits: dict[str, float] = {}

    def with_log_tails(self, ray: RayAdapter, plan: Plan, lines: int) -> Plan:
        """The plan, with the log tail of each failed run it names (a new value: the log is
        Ray's to give, after planning). The log is the failed run's, by the id the plan gives,
        not the status's: a retry queued in this pass has none yet, and one resubmitted in this
        pass already names its new run. Either keeps the failed run's tail on show (a retry
        admitted in a later pass clears it, lifecycle.admit). Only the log's end is read,
        within the status's caps (a huge line is cut, not copied)."""
        limits = TailLimits(lines=lines, max_bytes=LOG_TAIL_BYTES, line_bytes=LOG_LINE_BYTES)
        tails: dict[str, TaskStatus] = {}
        for name, sid in plan.fetch_logs.items():
            status = plan.statuses[name]
            try:
                text = ray.log_tail(sid, limits)
            except RayError as exc:
                log.warning("no log for failed %s: %s", name, exc)
                continue
            body = lifecycle.attach_log_tail(status.status, text)
            tails[name] = status.model_copy(update={"status": body})
        return replace(plan, statuses={**plan.statuses, **tails}) if tails else plan

    def submit(
        self,
        ray: RayAdapter,
        plan: Plan,
        unwritten: set[str],
        now: datetime,
        spec_of: Callable[[str], Task | None],
    ) -> dict[str, TaskStatus]:
        """Submit what the plan says; return the statuses of the runs Ray refused (Failed,
        written here). `spec_of`: a task's spec, for the log line."""
        failed_runs: dict[str, TaskStatus] = {}
        for submit in plan.submits:
            if submit.task in unwritten:
                continue  # never submit an id we could not record
            self.faults.crash_point("before_submit")
            try:
                refused = self.paths.check_task(submit.task, submit.request.runtime_env)
                if refused:
                    raise RayRequestError(
                        "; ".join(map(str, refused)) + " (checked again before submitting; "
                        "nothing was sent)"
                    )
                ray.submit(submit.request)
                self.stop_waits[submit.request.submission_id] = stop_wait_of(
                    submit.request.runtime_env
                )
                self.faults.crash_point("after_submit")
                _log_submitted(submit.task, submit.request.submission_id, spec_of(submit.task))
            except JobConflict:
                # Already in Ray: this run, submitted before a crash (the next pass follows it),
                # or a job whose metadata names another run, never adopted (specs/task/
                # ownership.py): the next pass fails the run (SubmissionIdConflict).
                log.info(
                    "%s is already in Ray; the next pass looks at it", submit.request.submission_id
                )
            except RayUnavailable as exc:
                self.ray_down.failed(f"submit of {submit.task} deferred: {exc}")
                break
            except RayRequestError as exc:
                log.error("Ray refused %s: %s", submit.task, exc)
                failed = planner.submit_failed(plan.statuses[submit.task], str(exc), now)
                failed_runs[submit.task] = failed
                try:
                    self.store.write_status(submit.task, failed)
                except OSError as write_exc:
                    self.status_writes.failed(f"{submit.task}: {write_exc}")
        return failed_runs

    def stop(
        self,
        ray: RayAdapter,
        plan: Plan,
        unwritten: AbstractSet[str],
        now: float,
        resend: float,
    ) -> None:
        """`resend`: how long to wait before resending the stop of a job this process did not
        submit (after a restart); one it submitted waits its own stop wait plus the margin."""
        # A stop is a request, not a fact: the planner asks again every pass until Ray reports
        # the job ended (a stop of a job still PENDING can be lost, ray #58353).
        # So one is sent per run (stops_sent), and again only after `resend` seconds.
        victims = {victim for p in plan.preemptions for victim in p.victims}
        wanted = {stop.submission_id for stop in plan.stops}
        for sid in [s for s in self.stops_sent if s not in wanted]:
            del self.stops_sent[sid]  # ended (or no longer ours to stop): forget it
            self.stop_waits.pop(sid, None)
        for stop in plan.stops:
            preempting = stop.task in victims
            if stop.task in unwritten:
                # The decision behind it (a preemption, a timeout) is not on disk: a crash now
                # would forget why the job stopped. The next pass decides again.
                continue
            sent = self.stops_sent.get(stop.submission_id)
            own = self.stop_waits.get(stop.submission_id)
            after = resend if own is None else max(own, RAY_STOP_WAIT) + STOP_MARGIN
            if sent is not None and now - sent < after:
                continue  # Ray is stopping it
            self.faults.crash_point("before_preempt_stop" if preempting else "before_stop")
            try:
                ray.stop(stop.submission_id)
                self.faults.crash_point("after_preempt_stop" if preempting else "after_stop")
                self.stops_sent[stop.submission_id] = now
                if sent is None:
                    log.info(
                        "stop requested for %s (%s): %s",
                        stop.task,
                        stop.submission_id,
                        stop.reason,
                    )
                else:
                    log.warning(
                        "stop of %s (%s) sent again: Ray still lists it %.0f s after the first",
                        stop.task,
                        stop.submission_id,
                        now - sent,
                    )
            except JobNotFound:
                pass  # gone already: what we wanted
            except RayUnavailable as exc:
                # Each further call would wait out its own timeout; the next pass retries all.
                self.ray_down.failed(f"stops deferred: {exc}")
                return
            except RayError as exc:
                log.warning("stop of %s failed, will retry: %s", stop.submission_id, exc)

    def expire(self, ray: RayAdapter, plan: Plan) -> None:
        """Drop finished jobs from Ray's history (--ray-history-retention); best effort."""
        for sid in plan.deletes:
            try:
                ray.delete(sid)
            except JobNotFound:
                pass
            except RayUnavailable as exc:
                self.ray_down.failed(f"history clean-up deferred: {exc}")
                return
            except RayError as exc:
                log.warning("cannot delete finished job %s from Ray: %s", sid, exc)
        if plan.deletes:
            log.info("deleted %d finished jobs from Ray's history", len(plan.deletes))


def _log_submitted(task: str, submission_id: str, spec: Task | None) -> None:
    if spec is None:
        log.info("submitted %s as %s", task, submission_id)
        return
    log.info(
        "submitted %s (priority %d, %s) as %s",
        task,
        spec.spec.priority,
        resources_text(request_of(spec)),
        submission_id,
    )
