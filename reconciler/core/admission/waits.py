"""Why a queued task does not start this pass, as data, and the one place its words are made.

The admission code (policies, fair share, preemption) says what a task lacks with one of the
typed values below; `render` turns a `Waiting` into the message written to its status. Nothing
else builds these strings, and nothing reads them back: code that needs to know why a task
waits looks at the value (`Waiting.lacks`, `Waiting.reason`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum, auto
from typing import ClassVar, assert_never

from reconciler.core.resources import amount, resources_text, unit
from specs.cluster import Capacity
from specs.task.models import Reason
from specs.task.quantity import human_memory, plural
from specs.task.visibility import Visibility

# --- what it lacks --------------------------------------------------------------------------


@dataclass(frozen=True)
class Shortfall:
    """The cluster has not enough of `resource` free ("cpu", "gpu" or "memory")."""

    reason: ClassVar[Reason] = Reason.WAITING_FOR_RESOURCES
    resource: str
    asked: float
    free: float  # never negative


@dataclass(frozen=True)
class OverHolder:
    """The live job that holds the most of one resource beyond what it declares: `name`, a
    task's name for a job of this queue (`ours`), else the job's submission id."""

    name: str
    ours: bool
    held: float
    declared: float


@dataclass(frozen=True)
class HeldInFact:
    """The cluster is full in fact: `asked` would fit what jobs declare, not what Ray says
    they hold (`free` counts that). `holder`: the job holding the most of `resource` beyond
    its declaration; None when none does and Ray itself reports less available than the
    declarations leave (`available`, Ray's figure; None: not read)."""

    reason: ClassVar[Reason] = Reason.WAITING_FOR_RESOURCES
    resource: str
    asked: float
    free: float  # never negative
    holder: OverHolder | None
    available: float | None = None


class BorrowBound(Enum):
    """Why a queue may not borrow more than it does."""

    BORROWING_LIMIT = auto()  # its own borrowingLimit
    NOTHING_TO_LEND = auto()  # no other queue has idle quota
    OTHERS_LEND = auto()  # the others lend only so much more
    NOT_PREEMPTIBLE = auto()  # preemptible: false runs only within its queue's nominal quota


@dataclass(frozen=True)
class QuotaShortfall:
    """Its team queue's quota (nominal plus what it may borrow now) is used up."""

    reason: ClassVar[Reason] = Reason.QUOTA_EXCEEDED
    queue: str
    resource: str
    used: float
    nominal: float
    borrowable: float  # how much more it may borrow now
    bound: BorrowBound
    limit: float = 0.0  # BORROWING_LIMIT: the limit; OTHERS_LEND: what they lend beyond


@dataclass(frozen=True)
class OverQuota:
    """It asks for more than its queue may ever hold: nominal + what it may borrow (its
    borrowingLimit, and what the other queues' lendingLimits let them lend); for a task with
    preemptible: false (`preemptible` False), which never borrows, its nominal quota alone."""

    reason: ClassVar[Reason] = Reason.QUOTA_EXCEEDED
    queue: str
    resource: str
    asked: float
    nominal: float
    borrowing_limit: float
    lenders: float = math.inf  # the most the other queues can ever lend
    preemptible: bool = True  # False: the task never borrows, `nominal` is all it may hold


@dataclass(frozen=True)
class RunningLimit:
    """Its team queue has `limit` tasks Starting or Running (`maxRunning`)."""

    reason: ClassVar[Reason] = Reason.MAX_RUNNING
    queue: str
    limit: int


@dataclass(frozen=True)
class QueueFull:
    """Its team queue already holds `limit` queued tasks (`maxQueued`) that came before it:
    it is not counted, and is let in as they start."""

    reason: ClassVar[Reason] = Reason.QUEUE_FULL
    queue: str
    limit: int


@dataclass(frozen=True)
class InflightLimit:
    """As many jobs are starting as may start at once."""

    reason: ClassVar[Reason] = Reason.INFLIGHT_LIMIT


@dataclass(frozen=True)
class BehindTask:
    """A task ahead of it is blocked, and nobody may overtake it."""

    reason: ClassVar[Reason] = Reason.WAITING_BEHIND_HIGHER_PRIORITY
    task: str


@dataclass(frozen=True)
class NotConsidered:
    """Admission gave up before reaching it: it tested `bound` candidates past the first that
    could not start (backfill_candidates, Slurm's bf_max_job_test), so a pass costs what the
    front of the queue holds, not the queue's length."""

    reason: ClassVar[Reason] = Reason.NOT_CONSIDERED
    bound: int


@dataclass(frozen=True)
class BehindReservation:
    """It fits now, but would delay the blocked front's reserved start (backfill)."""

    reason: ClassVar[Reason] = Reason.WAITING_BEHIND_RESERVATION
    front: str
    starts_at: float  # the front's reserved start
    timeout_seconds: float  # its own bound; 0: none


@dataclass(frozen=True)
class KeptForQueue:
    """It fits now, but its queue is above nominal and a queue with a lower share keeps the
    free resources for its front."""

    reason: ClassVar[Reason] = Reason.WAITING_BEHIND_RESERVATION
    queue: str
    keeper: str  # the queue with the lower share
    front: str  # the keeper's front


@dataclass(frozen=True)
class Preempting:
    """This pass stops `victims` so that it can start."""

    reason: ClassVar[Reason] = Reason.PREEMPTING
    victims: tuple[str, ...]
    priorities: tuple[int, ...]  # by victim
    freeing: Capacity  # what the victims hold
    needs: Capacity  # what it asks for
    lent: bool  # every victim runs on quota lent by its queue


@dataclass(frozen=True)
class AwaitingVictims:
    """It preempted `victims` in an earlier pass; they have not stopped yet."""

    reason: ClassVar[Reason] = Reason.PREEMPTING
    victims: tuple[str, ...]


@dataclass(frozen=True)
class PreemptedBy:
    """It was preempted; its stopped run is not gone from Ray yet."""

    reason: ClassVar[Reason] = Reason.PREEMPTED
    by: str


@dataclass(frozen=True)
class ScaleUp:
    """It fits what the cluster can grow to, not what is free now: its resources were asked
    of the autoscaler at `since` (epoch seconds); `pending`: nodes being launched."""

    reason: ClassVar[Reason] = Reason.WAITING_FOR_SCALE_UP
    requested: Capacity
    since: float
    pending: int
    timeout_at: float  # when it stops waiting for nodes (ScaleUpTimeout)


@dataclass(frozen=True)
class BehindScaleUp:
    """It fits now, but the free resources are kept for `front`, ahead of it, which waits for
    new nodes and needs them too (backfill must not take what the new nodes complete)."""

    reason: ClassVar[Reason] = Reason.WAITING_BEHIND_RESERVATION
    front: str


@dataclass(frozen=True)
class ScaleUpTimedOut:
    """The nodes asked for at `since` did not come within the scale-up timeout; it stops
    asking until `retry_at`, so one impossible request does not keep nodes up."""

    reason: ClassVar[Reason] = Reason.SCALE_UP_TIMEOUT
    requested: Capacity
    since: float
    timeout_seconds: float
    retry_at: float
    failures: tuple[str, ...]  # the autoscaler's failed launches, verbatim


@dataclass(frozen=True)
class ArrayAtMaxParallel:
    """Its array has `limit` elements Starting or Running (spec.array.maxParallel)."""

    reason: ClassVar[Reason] = Reason.ARRAY_AT_MAX_PARALLEL
    array: str
    limit: int


Lack = (
    Shortfall
    | HeldInFact
    | QuotaShortfall
    | OverQuota
    | RunningLimit
    | QueueFull
    | InflightLimit
    | BehindTask
    | NotConsidered
    | BehindReservation
    | KeptForQueue
    | Preempting
    | AwaitingVictims
    | PreemptedBy
    | ScaleUp
    | BehindScaleUp
    | ScaleUpTimedOut
    | ArrayAtMaxParallel
)


def shortfall(request: Capacity, free: Capacity) -> Shortfall:
    """The first resource of `request` that does not fit in `free` (memory if none)."""
    for resource, asked, have in (("cpu", request.cpu, free.cpu), ("gpu", request.gpu, free.gpu)):
        if asked > have + 1e-9:
            return Shortfall(resource, asked, max(have, 0))
    return Shortfall("memory", request.memory, max(free.memory, 0))


# --- what is said after its place --------------------------------------------------------------


@dataclass(frozen=True)
class ReservedStart:
    """Backfill reserved the resources it needs; it starts by `at` (epoch seconds)."""

    at: float


@dataclass(frozen=True)
class NoEstimate:
    """It needs resources held by jobs without a declared end: no start can be promised."""


@dataclass(frozen=True)
class NextPass:
    """Its policy would start it, but nothing more fit in this pass."""


Note = ReservedStart | NoEstimate | NextPass


# --- the decision ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Waiting:
    """Why a queued task does not start this pass: what it lacks, its place, and a note. Its
    reason follows from what it lacks; its message is `render(self)`."""

    lacks: Lack
    ahead: int | None = None  # tasks ahead of it in its queue; None: its place is not told
    queue: str | None = None  # the team queue its place counts in; None: the one queue
    note: Note | None = None

    @property
    def reason(self) -> Reason:
        return self.lacks.reason

    @property
    def estimated_start(self) -> float | None:
        return self.note.at if isinstance(self.note, ReservedStart) else None

    @property
    def message(self) -> str:
        return render(self)

    def message_to(self, reader: str, visibility: Visibility) -> str:
        """The message in the status of `reader`: a task its folder may not see is called
        "a task of another folder" (specs.task.visibility)."""
        if not visibility.readers:
            return render(self)
        return render(self, lambda other: visibility.name_for(reader, other))


def _as_is(name: str) -> str:
    return name


def render(waiting: Waiting, named: Callable[[str], str] = _as_is) -> str:
    """The message: what it lacks; its place; the note; each part present when set. `named`:
    how it calls another task."""
    parts = [_lack(waiting.lacks, named)]
    if waiting.ahead is not None:
        parts.append(_place(waiting.ahead, waiting.queue))
    if waiting.note is not None:
        parts.append(_note(waiting.note))
    return "; ".join(parts)


def _lack(lack: Lack, named: Callable[[str], str]) -> str:
    match lack:
        case Shortfall(resource, asked, free):
            if resource == "memory":
                return f"needs {human_memory(asked)} memory; {human_memory(free)} free"
            return f"needs {asked:g} {unit(resource)}; {free:g} free"
        case HeldInFact(resource, asked, free, holder, available):
            needs = f"needs {amount(resource, asked)} {unit(resource)}"
            needs += f"; {amount(resource, free)} free"
            if holder is not None:
                who = named(holder.name) if holder.ours else f"job {holder.name}"
                return (
                    f"cluster full in fact: {who} holds {amount(resource, holder.held)} "
                    f"{unit(resource)}, declared {amount(resource, holder.declared)}; {needs}"
                )
            reported = "" if available is None else f"{amount(resource, max(available, 0))} "
            return (
                f"cluster full in fact: Ray reports {reported}{unit(resource)} available, "
                f"less than the declarations leave; {needs}"
            )
        case QuotaShortfall(queue, r, used, nominal, borrowable, bound, limit):
            if bound is BorrowBound.BORROWING_LIMIT:
                why = f"borrowingLimit {amount(r, limit)}"
            elif bound is BorrowBound.OTHERS_LEND:
                why = f"other queues lend {amount(r, limit)} more"
            elif bound is BorrowBound.NOT_PREEMPTIBLE:
                why = "a task with preemptible: false runs only within its queue's nominal quota"
            else:
                why = "no other queue has idle quota to lend"
            return (
                f"{queue} uses {amount(r, used)}/{amount(r, nominal)} {unit(r)} of its quota; "
                f"can borrow {amount(r, borrowable)} more ({why})"
            )
        case OverQuota(queue, r, asked, nominal, _, _, False):
            return (
                f"asks for {amount(r, asked)} {unit(r)}; {queue} may hold at most "
                f"{amount(r, nominal)} for it (nominal {amount(r, nominal)}: a task with "
                "preemptible: false never borrows); it cannot start until the queue "
                "configuration or the task changes"
            )
        case OverQuota(queue, r, asked, nominal, borrowing_limit, lenders):
            if lenders < borrowing_limit:
                most = nominal + lenders
                why = f"what the other queues' lendingLimits let them lend {amount(r, lenders)}"
            else:
                most, why = (
                    nominal + borrowing_limit,
                    f"borrowingLimit {amount(r, borrowing_limit)}",
                )
            return (
                f"asks for {amount(r, asked)} {unit(r)}; {queue} may hold at most "
                f"{amount(r, most)} (nominal {amount(r, nominal)} + {why}); it cannot start "
                "until the queue configuration changes"
            )
        case RunningLimit(queue, limit):
            return f"{queue} has {plural(limit, 'task')} starting or running, its maxRunning"
        case QueueFull(queue, limit):
            return (
                f"{queue} is full: {plural(limit, 'task')} queued before it (maxQueued {limit}); "
                "this one "
                "is not counted until some of them start"
            )
        case InflightLimit():
            return "too many jobs starting at once"
        case ArrayAtMaxParallel(array, limit):
            return f"array {array} has {plural(limit, 'element')} starting or running (maxParallel)"
        case BehindTask(task):
            return f"waits behind {named(task)}"
        case NotConsidered(bound):
            return (
                "not considered this pass: admission tests at most "
                f"{plural(bound, 'task')} past the first that cannot start "
                "(RAYQUEUE_BACKFILL_CANDIDATES)"
            )
        case BehindReservation(front, starts_at, timeout_seconds):
            ends = (
                f"its timeoutSeconds={timeout_seconds:g} ends after"
                if timeout_seconds > 0
                else "it has no timeoutSeconds and would hold resources past"
            )
            return f"fits now, but {ends} {named(front)}'s reserved start at {_clock(starts_at)}"
        case KeptForQueue(queue, keeper, front):
            return (
                f"fits now, but {queue} is above its nominal quota and {keeper} has a lower "
                f"share; the free resources are kept for {named(front)}"
            )
        case Preempting(victims, priorities, freeing, needs, lent):
            return (
                f"preempting{' lent quota of' if lent else ''} {', '.join(map(named, victims))} "
                f"(priority "
                f"{', '.join(str(p) for p in priorities)}; {resources_text(freeing)}): it "
                f"needs {resources_text(needs)} and only those free enough; starts once "
                "they have stopped"
            )
        case AwaitingVictims(victims):
            return (
                f"preempted {', '.join(map(named, victims))}; starts once they have stopped "
                "(their resources are reserved for it)"
            )
        case PreemptedBy(by):
            return f"preempted by {named(by)}; queued again once its stopped run is gone"
        case ScaleUp(requested, since, pending, timeout_at):
            nodes = "no node" if pending == 0 else "1 node" if pending == 1 else f"{pending} nodes"
            return (
                f"requested {resources_text(requested)} from the autoscaler at {_clock(since)}; "
                f"{nodes} pending; gives up at {_clock(timeout_at)}"
            )
        case BehindScaleUp(front):
            return (
                f"fits now, but the free resources are kept for {named(front)}, which waits for "
                "new nodes"
            )
        case ScaleUpTimedOut(requested, since, timeout_seconds, retry_at, failures):
            said = "; ".join(failures) if failures else "no failed launch"
            return (
                f"the autoscaler did not bring {resources_text(requested)} within "
                f"{timeout_seconds:g} s of {_clock(since)} (it reports: {said}); asks again "
                f"at {_clock(retry_at)}"
            )
        case _:
            assert_never(lack)


def _place(ahead: int, queue: str | None) -> str:
    if ahead == 0:
        return f"first in {queue or 'queue'}"
    where = f" in {queue}" if queue else ""
    return f"1 task ahead{where}" if ahead == 1 else f"{ahead} tasks ahead{where}"


def _note(note: Note) -> str:
    match note:
        case ReservedStart(at):
            return f"resources reserved, starts by {_clock(at)}"
        case NoEstimate():
            return "no start estimate: it needs resources held by jobs without timeoutSeconds"
        case NextPass():
            return "waits for the next pass"
        case _:
            assert_never(note)


def _clock(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
