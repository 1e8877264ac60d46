"""What no task owns any more: stray jobs, refused deletions, Ray's job history, orphan sidecars.
Stages of a pass (reconciler.core.stages): each returns what it decided."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from reconciler.core.decisions import Event, RefusedDeletions, Stop, StopCause
from reconciler.core.stages import ChargedUse, PassInputs
from reconciler.core.task.jobs import charged_claim
from reconciler.core.task.preemptedby import shown
from reconciler.core.timestamps import EARLY
from specs.cluster import (
    META_TASK,
    Capacity,
    RayJob,
)
from specs.task.inputs import TaskInput
from specs.task.models import Reason
from specs.task.quantity import plural
from specs.task.status import TaskStatus, TaskStatusBody

__all__ = ["Expiry", "Strays", "expire_finished_jobs", "orphan_sidecars", "stop_strays"]


@dataclass(frozen=True)
class Strays:
    """The live jobs of ours that no active run owns: stopped, or their deletion refused."""

    stops: Sequence[Stop]
    refused: RefusedDeletions | None
    events: Sequence[Event]
    # What runs hold, these jobs counted: each holds its resources until it ends.
    charged_use: ChargedUse


def stop_strays(
    inputs: PassInputs,
    specs: Mapping[str, TaskInput],
    kept_jobs: Set[str],
    bodies: Mapping[str, TaskStatusBody],
    charged_use: ChargedUse,
) -> Strays:
    """Stop every live job of ours that no active run owns: ended runs, old runs, deleted tasks."""
    ours = inputs.env.ours
    stops: list[Stop] = []
    deletions: list[RayJob] = []
    used, in_use, unobserved = charged_use.used, dict(charged_use.in_use), charged_use.unobserved
    held = inputs.obs.held
    for sid in sorted(ours):
        job = ours[sid]
        if job.terminal or sid in kept_jobs:
            continue
        charge = charged_claim(job, held)
        used = used + charge  # still holds resources until it ends
        if sid not in held:
            unobserved = unobserved + charge
        task = job.metadata.get(META_TASK, "")
        in_use[task] = in_use.get(task, Capacity()) + charge
        if task in specs:
            owner = bodies.get(task)
            if owner is not None and owner.preempted_by:
                by = shown(inputs.options.visibility, task, owner.preempted_by)
                stops.append(Stop(sid, task, StopCause.PREEMPTED, by))
            else:
                stops.append(Stop(sid, task, StopCause.RUN_ENDED))
        else:
            deletions.append(job)
    kept = ChargedUse(used, in_use, charged_use.claims, unobserved)
    refused = _refuse_deletions(inputs, len(deletions)) if deletions else None
    if refused is not None:
        event = Event(logging.WARNING, refused.reason, refused.message)
        return Strays(stops, refused, [event], kept)
    for job in deletions:
        stops.append(Stop(job.submission_id, job.metadata.get(META_TASK), StopCause.SPEC_DELETED))
    return Strays(stops, None, [], kept)


def _refuse_deletions(inputs: PassInputs, count: int) -> RefusedDeletions | None:
    """Deletions that look like an accident are refused until a human says otherwise."""
    if inputs.options.allow_mass_delete:
        return None
    if inputs.folder_empty:
        # Argo CD's allowEmpty: a folder with no spec and no sidecar left is far more often an
        # unmounted volume or a botched checkout than a wish to stop everything.
        return RefusedDeletions(
            count,
            Reason.FOLDER_EMPTY,
            f"REFUSING to stop {plural(count, 'job')}: the tasks folder holds no specs and no "
            "status files (unmounted?); restore it, or restart with --allow-mass-delete",
        )
    limit = inputs.options.max_stops_per_pass
    if limit and count > limit:
        return RefusedDeletions(
            count,
            Reason.TOO_MANY_DELETIONS,
            f"REFUSING to stop {plural(count, 'job')} whose specs disappeared in one pass "
            f"(limit {limit}); restore the specs, or restart with --allow-mass-delete",
        )
    return None


@dataclass(frozen=True)
class Expiry:
    """Finished jobs of ours to drop from Ray's history, oldest first, and up to when that
    answer holds."""

    deletes: Sequence[str]
    until: float


def expire_finished_jobs(inputs: PassInputs, statuses: Mapping[str, TaskStatus]) -> Expiry:
    """Ray lists every job it ever ran, so each pass grows with history. A finished job of ours
    may go once the retention time has passed and no sidecar on disk still waits for its
    outcome (a run whose status file says it is active has not recorded its end yet)."""
    options, now = inputs.options, inputs.now
    retention = options.ray_history_retention_seconds
    if retention is None:
        return Expiry([], math.inf)
    awaited = {
        s.status.submission_id
        for s in statuses.values()
        if s.status.submission_id and s.status.phase.active
    }
    until = math.inf
    expired = []
    for sid, job in inputs.env.ours.items():
        if not job.terminal or job.end_time is None:
            continue
        if sid in awaited:
            # This pass records its end (or a later one will): from then on it expires, so
            # the answer to the statuses this pass writes holds until then only (the loop
            # skips the read-back of a plan's own writes: core/incremental/standing.py).
            until = min(until, max(job.end_time + retention - EARLY, now))
            continue
        if now - job.end_time > retention:
            expired.append((job.end_time, sid))
        else:  # expires later: the answer holds until then
            until = min(until, max(job.end_time + retention - EARLY, now))
    expired.sort()
    return Expiry([sid for _, sid in expired[: options.max_deletes_per_pass]], until)


def orphan_sidecars(
    inputs: PassInputs,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    stops: Sequence[Stop],
    refused: RefusedDeletions | None,
) -> list[str]:
    """The sidecars without a spec to delete: each goes once its job has ended, so the run's
    id is never lost. `stops`: the jobs this pass stops; `refused`: deletions refused."""
    if not inputs.obs.available or refused is not None:
        return []
    ours = inputs.env.ours
    stopping = {s.submission_id for s in stops}
    deleted: list[str] = []
    # By name, not in the order the statuses came in, which is no order
    # (tests/unit/core/test_plan_input_order.py).
    for name in sorted(n for n in statuses if n not in specs):
        sid = statuses[name].status.submission_id
        job = ours.get(sid) if sid else None
        if (job is not None and not job.terminal) or sid in stopping:
            continue
        deleted.append(name)
    return deleted
