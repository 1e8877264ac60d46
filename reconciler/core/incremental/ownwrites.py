"""A waiting task's result carried over to the status the loop itself just wrote.

After a pass, the loop (the simulator alike) writes the statuses the plan gave (a queue
position, a reason), and the store stamps each with a new generation: the next pass sees a new
version for every task whose status it moved (all of them after a cold start), and would
reconcile each anew. For a task
that simply waits in the queue, that reconcile is known in advance: `reconcile_task` of a
Queued status with the spec's hash, no backoff, no dependency cycle, reads of the status only
`queuedAt` (its place in the order) and hands the status back as it is, reading neither the
clock nor its run's job. So its result is the last one with that status put in: `after_write`
builds it, or answers None when any of those conditions does not hold (then the task is
reconciled anew). tests/unit/core/incremental/test_ownwrites.py checks it against `reconcile_task`.
"""

from __future__ import annotations

from reconciler.core.task.step import TaskResult, Waiter
from reconciler.core.timestamps import to_epoch
from specs.task.inputs import TaskInput
from specs.task.models import Phase
from specs.task.status import TaskStatus


def after_write(result: TaskResult, spec: TaskInput, status: TaskStatus) -> TaskResult | None:
    """`reconcile_task(env, spec, status, now)` for any `now`, given that `result` is
    `reconcile_task(env, spec0, status0, now0)` with the same pass-wide `env` (the memo's
    world) and a spec0 of the very same Task object; None: not known without reconciling."""
    waiter = result.waiter
    task = spec.task
    if (
        waiter is None
        or task is None
        or waiter.task is not task  # the task that was enqueued: the same parse of the file
        or waiter.gated
        or task.spec.suspend
        or result.events
        or result.submits
        or result.timeouts
        or result.conds  # Ray unreachable or a broken spec: never a plain wait
        or result.fetch_log is not None
        or result.in_use is not None
        or result.running is not None
    ):
        return None
    body = status.status
    queued = to_epoch(body.queued_at)
    if (
        body.phase is not Phase.QUEUED
        or body.spec_hash != spec.hash_of(task)
        or body.next_retry_at is not None
        or body.submission_id is not None  # a queued status names no run: reconcile judges it
        or not queued  # without it (or at epoch 0) the place would be read from the clock
    ):  # (and a Queued status is never held in a dependency cycle: states.in_cycle)
        return None
    # The enqueue of `result` showed the task fits the cluster (the same env); its key's
    # priority and name come from the same task; only the time it queued is the status's.
    # (After a start, the loop wrote the status the plan gave: its place is the one the result
    # was enqueued with, and the very waiter is handed on: not built again, equal at once.)
    if queued != waiter.key[1]:
        waiter = Waiter(waiter.key._replace(queued_at=queued), waiter.candidate, task, False)
    return TaskResult(body, waiter=waiter)
