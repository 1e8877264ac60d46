"""How each status of a plan reaches its sidecar: fsynced, written, or left to write later.

The sidecar is a write-ahead record only for what the next pass could not derive again from
the folder and Ray: a submission id before its submit, the reason of a stop before the stop,
a run's end before Ray's history of it may go. Those are fsynced. Everything else (phases
observed from Ray, conditions) is written atomically without fsync: an OS crash may roll it
back, and the level-triggered loop derives it again. A waiting task's queue position and a new
task's first Queued record are not even urgent: they are written behind, within a budget (see
`Settings.position_write_seconds`), so a reordered queue does not rewrite thousands of files
in every pass. The rule is documented in docs/reliability.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from reconciler.core.planner import Plan
from specs.models import Phase, TaskStatus, TaskStatusBody

# Fields that follow the queue's order rather than a decision about the task itself.
_POSITION_FIELDS = frozenset({"queue_position", "message", "estimated_start_at"})


@dataclass(frozen=True)
class WriteClasses:
    """Names of the changed statuses of one plan, by how they are written."""

    durable: frozenset[str]  # fsynced before any Ray call that depends on them
    prompt: frozenset[str]  # written this pass, atomically, without fsync
    deferred: frozenset[str]  # left to the store's write-behind


def classify(
    plan: Plan, before: Mapping[str, TaskStatus], edited: AbstractSet[str] = frozenset()
) -> WriteClasses:
    """Sort the statuses `plan` changed (a status handed back as the very object given is
    unchanged and in no class). `edited`: tasks whose spec changed since the last pass; their
    own new place in the queue (a raised priority) is what their author looks for, so it is
    written at once; only the knock-on moves of the others wait."""
    acting = {s.task for s in plan.submits}
    acting |= {s.task for s in plan.stops if s.task is not None}
    acting |= {t.task for t in plan.timeouts}
    for preemption in plan.preemptions:
        acting.add(preemption.preemptor)
        acting.update(preemption.victims)
    durable: set[str] = set()
    prompt: set[str] = set()
    deferred: set[str] = set()
    for name, status in plan.statuses.items():
        old = before.get(name)
        if old is status:
            continue
        if name in acting or records_a_run(old, status):
            durable.add(name)
        elif name not in edited and deferrable(old, status):
            deferred.add(name)
        else:
            prompt.add(name)
    return WriteClasses(frozenset(durable), frozenset(prompt), frozenset(deferred))


def records_a_run(old: TaskStatus | None, new: TaskStatus) -> bool:
    """Whether `new` records something about a run that only the sidecar keeps: a new run or
    submission id, a run's end (Ray may forget the job: history retention, a head restart),
    or a counter of retries and preemptions."""
    body = new.status
    if old is None:
        return body.submission_id is not None or body.phase.finished
    was = old.status
    return (
        body.submission_id != was.submission_id
        or body.run != was.run
        or (body.uid != was.uid and body.run > 0)
        or (body.phase.finished and body.phase is not was.phase)
        or body.retries != was.retries
        or body.preemptions != was.preemptions
        or body.lost_restarts != was.lost_restarts
    )


def deferrable(old: TaskStatus | None, new: TaskStatus) -> bool:
    """A new task's first Queued record, or a change of queue position (and the message and
    estimate that follow it) only."""
    if new.status.phase is not Phase.QUEUED:
        return False
    if old is None:
        return new.status.submission_id is None
    return old.metadata == new.metadata and _without_position(old.status) == _without_position(
        new.status
    )


def _without_position(body: TaskStatusBody) -> dict[str, object]:
    return {k: v for k, v in vars(body).items() if k not in _POSITION_FIELDS}
