"""What a pass decides, besides the statuses: the actions the shell carries out and the events it
logs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, auto

from reconciler.core.queues import dispatch
from specs.cluster import (
    Capacity,
    SubmitRequest,
)
from specs.task.models import ConditionType, Reason

# The conditions a task's status should list this pass: each with its reason and message.
Wanted = dict[ConditionType, tuple[Reason | ConditionType, str]]


class StopCause(Enum):
    RUN_ENDED = auto()  # a run no active status owns any more: ended, superseded, suspended
    SPEC_DELETED = auto()
    PREEMPTED = auto()


@dataclass(frozen=True)
class Stop:
    submission_id: str
    task: str | None
    cause: StopCause
    by: str | None = None  # PREEMPTED: the preemptor

    @property
    def reason(self) -> str:
        """The words the log and `rayqueue plan` show."""
        if self.cause is StopCause.PREEMPTED:
            return f"preempted by {self.by}"
        return "spec deleted" if self.cause is StopCause.SPEC_DELETED else "run ended"


@dataclass(frozen=True)
class Submit:
    task: str
    request: SubmitRequest


@dataclass(frozen=True)
class TimeOut:
    """A run ended by a time limit this pass; its job is among the stops."""

    task: str
    submission_id: str
    reason: Reason  # TimeoutExceeded (spec.timeoutSeconds) or StartTimeout (pending too long)
    message: str


@dataclass(frozen=True)
class Preemption:
    """Running tasks stopped this pass so that `preemptor` can start; their jobs are among the
    stops, and their statuses (queued again, Preempted) are written before the stops go out."""

    preemptor: str
    victims: tuple[str, ...]
    reason: Reason  # Reclaim if any victim's queue lent to it, else WithinQueue
    free: Capacity  # what the preemptor had without them: it did not fit, with them it does
    reasons: tuple[Reason, ...] = ()  # by victim: its Preempted condition's reason
    queue: str | None = None  # the preemptor's team queue, when queues are configured


@dataclass(frozen=True)
class RefusedDeletions:
    """Jobs whose specs vanished, left running because the vanishing looks like an accident."""

    count: int
    reason: Reason
    message: str


@dataclass(frozen=True)
class Event:
    """One decision, for the log."""

    level: int  # a logging level: INFO, or WARNING for what needs a human
    reason: Reason
    message: str
    # the task whose status file it is about (STATUS_IGNORED): the shell names the file
    task: str | None = None


@dataclass(frozen=True)
class Summary:
    capacity: Capacity | None
    used: Capacity
    queued: int
    starting: int
    running: int
    queues: dispatch.QueueSummary | None = None  # per-queue state, when queues are configured
    # The waiting tasks of each queue ("" without queues) in place order: the exact places the
    # sidecars beyond exact_queue_positions do not show (the API computes them from this).
    order: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # Waiting tasks admission did not test this pass: past backfill_candidates (NotConsidered).
    not_considered: int = 0
