"""How each status a pass changes must reach disk: a decision of the planner, carried out by
the shell (reconciler/shell/loop/writes.py), which adds only the mechanics (a write budget, and
writing at once the new place of a task its author just edited).

The sidecar is a write-ahead record only for what the next pass could not derive again from
the folder and Ray: a submission id before its submit, the reason of a stop before the stop,
a run's end before Ray's history of it may go. Those are DURABLE (fsynced before any Ray call
that depends on them). Everything else (phases observed from Ray, conditions) is PROMPT:
written atomically in this pass without fsync; an OS crash may roll it back, and the
level-triggered loop derives it again. A waiting task's move in the queue, and a new task's
first Queued record, are POSITION: not even urgent, so the shell may write them behind. The
rule is documented in docs/reliability.md.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from enum import Enum

from reconciler.core.decisions import Preemption, Stop, Submit, TimeOut
from specs.task.models import Phase
from specs.task.status import TaskStatus, TaskStatusBody


class WriteClass(Enum):
    """How one changed status reaches its sidecar."""

    DURABLE = "durable"  # fsynced before any Ray call of this pass
    PROMPT = "prompt"  # written this pass, atomically, without fsync
    POSITION = "position"  # a queue move or a first Queued record only: may be written behind


# Fields that follow the queue's order rather than a decision about the task itself.
_POSITION_FIELDS = frozenset(
    {"queue_position", "queue_position_bucket", "message", "estimated_start_at"}
)


def acting(
    submits: Iterable[Submit],
    stops: Iterable[Stop],
    timeouts: Iterable[TimeOut],
    preemptions: Iterable[Preemption],
) -> frozenset[str]:
    """The tasks a pass acts on in Ray: submitted, stopped, timed out, preempting or preempted.
    Their statuses say why, so they are on disk before the action."""
    names = {s.task for s in submits}
    names |= {s.task for s in stops if s.task is not None}
    names |= {t.task for t in timeouts}
    for preemption in preemptions:
        names.add(preemption.preemptor)
        names.update(preemption.victims)
    return frozenset(names)


def write_class(old: TaskStatus | None, new: TaskStatus, acting: bool) -> WriteClass:
    """How `new`, a changed status (`old`: the one it replaces), reaches disk. `acting`: the
    pass acts on its task in Ray."""
    if acting or records_a_run(old, new):
        return WriteClass.DURABLE
    if position_only(old, new):
        return WriteClass.POSITION
    return WriteClass.PROMPT


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


def position_only(old: TaskStatus | None, new: TaskStatus) -> bool:
    """A new task's first Queued record, or a change of queue position (and the message and
    estimate that follow it) only."""
    if new.status.phase is not Phase.QUEUED:
        return False
    if old is None:
        return new.status.submission_id is None
    return old.metadata == new.metadata and _without_position(old.status) == _without_position(
        new.status
    )


# The other fields' places in the record: equal tuples of them then means equal elsewhere (a
# C-speed pick and compare, run for every moved exact place of every pass).
_OTHER_FIELDS = operator.itemgetter(
    *(i for i, name in enumerate(TaskStatusBody._fields) if name not in _POSITION_FIELDS)
)


def _without_position(body: TaskStatusBody) -> tuple[object, ...]:
    others: tuple[object, ...] = _OTHER_FIELDS(body)
    return others
