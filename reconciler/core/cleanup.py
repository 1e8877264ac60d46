"""What no task owns any more: stray jobs, refused deletions, Ray's job history, orphan sidecars."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from reconciler.core.decisions import RefusedDeletions, Stop, StopCause
from reconciler.core.inputs import TaskInput
from reconciler.core.task.jobs import claim_of
from reconciler.core.timestamps import EARLY
from specs.cluster import (
    META_TASK,
    Capacity,
    RayJob,
)
from specs.task.models import Reason
from specs.task.status import TaskStatus

if TYPE_CHECKING:
    from reconciler.core.planner import PassState


def stop_strays(ctx: PassState, ours: Mapping[str, RayJob], specs: Mapping[str, TaskInput]) -> None:
    """Stop every live job of ours that no active run owns: ended runs, old runs, deleted tasks."""
    deletions: list[RayJob] = []
    for sid in sorted(ours):
        job = ours[sid]
        if job.terminal or sid in ctx.kept_jobs:
            continue
        ctx.used = ctx.used + claim_of(job)  # still holds resources until it ends
        task = job.metadata.get(META_TASK, "")
        ctx.in_use[task] = ctx.in_use.get(task, Capacity()) + claim_of(job)
        if task in specs:
            owner = ctx.bodies.get(task)
            if owner is not None and owner.preempted_by:
                ctx.plan.stops.append(Stop(sid, task, StopCause.PREEMPTED, owner.preempted_by))
            else:
                ctx.plan.stops.append(Stop(sid, task, StopCause.RUN_ENDED))
        else:
            deletions.append(job)
    refused = _refuse_deletions(ctx, len(deletions)) if deletions else None
    if refused is not None:
        ctx.plan.refused_deletions = refused
        ctx.plan.note(refused.reason, refused.message, logging.WARNING)
        return
    for job in deletions:
        ctx.plan.stops.append(
            Stop(job.submission_id, job.metadata.get(META_TASK), StopCause.SPEC_DELETED)
        )


def _refuse_deletions(ctx: PassState, count: int) -> RefusedDeletions | None:
    """Deletions that look like an accident are refused until a human says otherwise."""
    if ctx.options.allow_mass_delete:
        return None
    if ctx.folder_empty:
        # Argo CD's allowEmpty: a folder with no spec and no sidecar left is far more often an
        # unmounted volume or a botched checkout than a wish to stop everything.
        return RefusedDeletions(
            count,
            Reason.FOLDER_EMPTY,
            f"REFUSING to stop {count} jobs: the tasks folder holds no specs and no "
            "status files (unmounted?); restore it, or restart with --allow-mass-delete",
        )
    limit = ctx.options.max_stops_per_pass
    if limit and count > limit:
        return RefusedDeletions(
            count,
            Reason.TOO_MANY_DELETIONS,
            f"REFUSING to stop {count} jobs whose specs disappeared in one pass "
            f"(limit {limit}); restore the specs, or restart with --allow-mass-delete",
        )
    return None


def expire_finished_jobs(
    ctx: PassState, ours: Mapping[str, RayJob], statuses: Mapping[str, TaskStatus]
) -> None:
    """Ray lists every job it ever ran, so each pass grows with history. A finished job of ours
    may go once the retention time has passed and no sidecar on disk still waits for its
    outcome (a run whose status file says it is active has not recorded its end yet)."""
    retention = ctx.options.ray_history_retention_seconds
    if retention is None:
        return
    awaited = {
        s.status.submission_id
        for s in statuses.values()
        if s.status.submission_id and s.status.phase.active
    }
    expired = []
    for sid, job in ours.items():
        if not job.terminal or job.end_time is None:
            continue
        if sid in awaited:
            # This pass records its end (or a later one will): from then on it expires, so
            # the answer to the statuses this pass writes holds until then only (the loop
            # skips the read-back of a plan's own writes: shell/loop/readback.py).
            ctx.until = min(ctx.until, max(job.end_time + retention - EARLY, ctx.now))
            continue
        if ctx.now - job.end_time > retention:
            expired.append((job.end_time, sid))
        else:  # expires later: the answer holds until then
            ctx.until = min(ctx.until, max(job.end_time + retention - EARLY, ctx.now))
    expired.sort()
    ctx.plan.deletes = [sid for _, sid in expired[: ctx.options.max_deletes_per_pass]]


def orphan_sidecars(
    ctx: PassState,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    ours: Mapping[str, RayJob],
) -> None:
    """A sidecar without a spec goes once its job has ended, so the run's id is never lost."""
    stopping = {s.submission_id for s in ctx.plan.stops}
    # By name, not in the order the statuses came in (which is no order: tests/unit/
    # test_plan_input_order.py).
    for name in sorted(n for n in statuses if n not in specs):
        sid = statuses[name].status.submission_id
        job = ours.get(sid) if sid else None
        if not ctx.obs.available or (job is not None and not job.terminal) or sid in stopping:
            continue
        if ctx.plan.refused_deletions is not None:
            continue
        ctx.plan.delete_statuses.append(name)
