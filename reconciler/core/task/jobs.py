"""What a task asks of Ray and what a job holds: requests, claims, ids, the submit request."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from datetime import datetime

from reconciler.core.task.step import TaskEnv
from specs.cluster import (
    META_CPU,
    META_GPU,
    META_MEMORY,
    META_QUEUE,
    META_REVISION,
    META_RUN,
    META_SPEC_HASH,
    META_TASK,
    META_UID,
    Capacity,
    RayJob,
    SubmitRequest,
)
from specs.task.models import request_capacity
from specs.task.records import Task
from specs.task.status import TaskStatusBody
from specs.tenancy.policy import STOP_WAIT_ENV


def request_of(task: Task) -> Capacity:
    return request_capacity(task.spec.resources)  # one object per shared resources value


def bundles_of(task: Task) -> tuple[Capacity, ...]:
    """The task's own shape for the autoscaler (spec.resources.bundles); () when not given."""
    return tuple(Capacity(b.cpu, b.gpu, float(b.memory)) for b in task.spec.resources.bundles)


def claim_of(job: RayJob) -> Capacity:
    def num(key: str) -> float:
        try:
            return float(job.metadata.get(key, 0) or 0)
        except ValueError:
            return 0.0

    return Capacity(num(META_CPU), num(META_GPU), num(META_MEMORY))


def foreign_claim(job: RayJob) -> Capacity:
    """Another rayqueue queue's job: its declared reservation; any other job: what it asked
    Ray for its entrypoint (entrypoint_num_cpus and friends)."""
    if META_QUEUE in job.metadata:
        return claim_of(job)
    return Capacity(job.entrypoint_cpus, job.entrypoint_gpus, job.entrypoint_memory)


NO_CHARGE = Capacity()


def charged(declared: Capacity, held: Capacity | None) -> Capacity:
    """What a live job counts for: per resource, the more of what it declares and what Ray
    says it holds (`held`; None: not observed, so what it declares). Nothing holds a job to
    its declaration in Ray, so a job that holds more takes that much more of the cluster, its
    queue's quota and its share; one that holds less still keeps what it declared, which it
    may take at any time. `declared` itself when it holds no more."""
    if held is None or held.fits_in(declared):
        return declared
    return Capacity(
        max(declared.cpu, held.cpu), max(declared.gpu, held.gpu), max(declared.memory, held.memory)
    )


def charged_claim(job: RayJob, held: Mapping[str, Capacity]) -> Capacity:
    """A job of ours that no active run counts (a stray, a preempted run still stopping):
    what it declared when submitted (its metadata), or what Ray says it holds if more."""
    return charged(claim_of(job), held.get(job.submission_id))


def foreign_charge(job: RayJob, count_declared: bool, held: Mapping[str, Capacity]) -> Capacity:
    """A live job not of this queue: what Ray says it holds when observed, and with
    `count_declared` (--count-foreign-jobs) at least its declared reservation
    (`foreign_claim`); nothing when neither is known."""
    declared = foreign_claim(job) if count_declared else NO_CHARGE
    return charged(declared, held.get(job.submission_id))


def make_uid(queue_id: str, name: str, first_seen: datetime) -> str:
    """Fixed at first sight of a task; a re-created task is seen anew and gets another."""
    return uid_at(queue_id, name, first_seen.isoformat())


def uid_at(queue_id: str, name: str, first_seen: str) -> str:
    """`make_uid` with the instant's ISO text given (a cold start sees every task at once)."""
    return hashlib.sha256(f"{queue_id}/{name}@{first_seen}".encode()).hexdigest()[:8]


def submit_request(env: TaskEnv, name: str, task: Task, body: TaskStatusBody) -> SubmitRequest:
    options, req = env.options, request_of(task)
    return SubmitRequest(
        submission_id=body.submission_id or "",
        entrypoint=task.spec.entrypoint,
        runtime_env=_runtime_env(task, env.preemption.stop_wait(name), body),
        metadata={
            META_QUEUE: options.queue_id,
            META_TASK: name,
            META_UID: body.uid or "",
            META_RUN: str(body.run),
            META_SPEC_HASH: body.spec_hash or "",
            META_CPU: f"{req.cpu:g}",
            META_GPU: f"{req.gpu:g}",
            META_MEMORY: f"{req.memory:.0f}",
            # Which commit produced this job: answered in Ray too, not only in the sidecar.
            **({META_REVISION: body.source.revision} if body.source is not None else {}),
        },
    )


RUN_ENV = "RAYQUEUE_RUN"
"""Every job's run number (1, 2, ...), as in its submission id."""
PREEMPTED_ENV = "RAYQUEUE_PREEMPTED"
"""1 in a run that follows a preemption: a resumable task loads its checkpoint."""

# Ray's job supervisor waits STOP_WAIT_ENV seconds (whole, read from its own environment, which
# the job's runtime_env env_vars set) between SIGTERM and SIGKILL when a job is stopped.


def _runtime_env(task: Task, grace: float | None, body: TaskStatusBody) -> dict[str, object]:
    """The task's runtime_env, plus its run number (RAYQUEUE_RUN), RAYQUEUE_PREEMPTED=1 when
    the run follows a preemption (a resumable script loads its checkpoint), and its queue's
    grace period when its run could be preempted. Ours win over the spec's own values.

    The queue's grace is a ceiling: a spec may ask for less, never more (a team that could set
    its own would hold the resources a preemptor waits for as long as it liked). None of this
    is in the spec hash (that reads the spec's runtimeEnv), so it changes no id and restarts
    nothing."""
    env = task.spec.runtime_env or {}
    env_vars = dict(env.get("env_vars") or {})
    env_vars[RUN_ENV] = str(body.run)
    if body.after_preemption:
        env_vars[PREEMPTED_ENV] = "1"
    else:
        env_vars.pop(PREEMPTED_ENV, None)  # only rayqueue says a run was preempted
    if grace is not None:
        ceiling = math.ceil(grace)
        asked = _whole_seconds(env_vars.get(STOP_WAIT_ENV))
        env_vars[STOP_WAIT_ENV] = str(ceiling if asked is None else min(asked, ceiling))
    return {**env, "env_vars": env_vars}


def _whole_seconds(value: object) -> int | None:
    """A stop wait as Ray would read it (a whole number >= 0), or None if it is not one."""
    try:
        seconds = int(str(value).strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
