"""The task state machine itself: the states (a phase, with the sub-states a phase alone does
not tell), the triggers, and the table of which may follow which. `reconciler.core.task.lifecycle`
fires the triggers and says which status fields each step writes.

`state_of` reads a status file's state, here only: the planner asks for it instead of reading
reasons back. A `(state, trigger)` pair missing from `TRANSITIONS` raises `IllegalTransition`:
the planner routes each task by its state and fires only what that state allows, so an
illegal pair is a bug, never a quiet no-op.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import Enum, auto

from specs.task.models import FINISHED, Phase, Reason
from specs.task.status import TaskStatusBody


class State(Enum):
    """A phase, with the sub-states the planner needs told apart."""

    QUEUED = auto()
    PREEMPTING = auto()  # Queued: a preemptor whose victims are stopping (reason Preempting)
    UNSCHEDULABLE = auto()
    STARTING = auto()
    RUNNING = auto()
    MISSING = auto()  # Running, but Ray no longer lists the job: the grace period runs
    MISSING_AFTER_OUTAGE = auto()  # ... first seen missing when Ray came back
    SUCCEEDED = auto()
    FAILED = auto()
    TIMED_OUT = auto()
    STOPPED = auto()
    LOST = auto()
    SUSPENDED = auto()
    INVALID = auto()  # the spec does not parse (or claims an id another task has)
    IN_CYCLE = auto()  # Invalid only through its dependencies: they form a cycle

    @property
    def phase(self) -> Phase:
        return _PHASE_OF[self]


_PHASE_OF = {
    **{state: Phase[state.name] for state in State if state.name in Phase.__members__},
    State.PREEMPTING: Phase.QUEUED,
    State.MISSING: Phase.RUNNING,
    State.MISSING_AFTER_OUTAGE: Phase.RUNNING,
    State.IN_CYCLE: Phase.INVALID,
}


def state_of(body: TaskStatusBody) -> State:
    """The state a status is in, read from its fields (the only place that reads reasons
    back)."""
    phase = body.phase
    if phase is Phase.QUEUED:  # most tasks, most passes: decided without hashing an enum
        return State.PREEMPTING if body.reason == Reason.PREEMPTING else State.QUEUED
    if phase is Phase.RUNNING and missing_since(body) is not None:
        if body.reason == Reason.JOB_MISSING_AFTER_OUTAGE:
            return State.MISSING_AFTER_OUTAGE
        return State.MISSING
    if in_cycle(body):
        return State.IN_CYCLE
    return State[phase.name]


def in_cycle(body: TaskStatusBody) -> bool:
    """`state_of(body) is State.IN_CYCLE`, without the rest of state_of (asked several times
    per task); state_of reads the rule here."""
    return body.phase is Phase.INVALID and body.reason == Reason.DEPENDENCY_CYCLE


class IllegalTransition(Exception):
    """A trigger fired in a state that does not allow it: a bug in the caller."""

    def __init__(self, state: State, trigger: Trigger) -> None:
        super().__init__(f"{trigger.name} is not allowed in state {state.name}")
        self.state = state
        self.trigger = trigger


class Trigger(Enum):
    """What happened to a task, as far as its phase is concerned."""

    INVALIDATE = auto()  # the spec no longer parses, and no run is active
    SPEC_CHANGED = auto()  # a run-defining field changed (or the spec was fixed): a new run
    SUSPEND = auto()
    RESUME = auto()
    QUEUE = auto()  # waits in the queue: its place, and why
    HOLD = auto()  # waits off the queue: a retry's backoff, or its dependencies
    WAIT_FOR_VICTIMS = auto()  # a preemptor waits in the queue while its victims stop
    UNSCHEDULABLE = auto()  # asks for more than the whole cluster has
    ADMIT = auto()  # the policy starts it: a new run is submitted
    SUBMIT_REFUSED = auto()  # Ray refused the submission for good
    RAY_PENDING = auto()
    RAY_RUNNING = auto()
    RAY_SUCCEEDED = auto()
    RAY_FAILED = auto()
    RAY_STOPPED = auto()  # stopped by someone other than rayqueue
    ID_CONFLICT = auto()  # the submission id is held by a job that is not this run's
    JOB_MISSING = auto()  # Ray no longer lists the running job: the grace period starts
    JOB_MISSING_AFTER_OUTAGE = auto()  # ... first seen so when Ray came back from an outage
    REQUEUE_LOST = auto()  # it stayed missing; restarts are left: queued again
    LOSE = auto()  # it stayed missing; no restarts left
    TIME_OUT = auto()  # ran longer than spec.timeoutSeconds
    START_TIMEOUT = auto()  # pending in Ray for longer than the start timeout
    RETRY = auto()  # a failed or timed-out run is tried again (spec.retry)
    GIVE_UP = auto()  # no retry: the limit is used up, or the exit code is final
    DEPENDENCY_CYCLE = auto()  # a waiting task is part of a dependency cycle
    CYCLE_RESOLVED = auto()  # ... and no longer is: back into the queue
    PREEMPT = auto()  # stopped to make room for a more urgent task: queued again


def _states(*phases: Phase) -> list[State]:
    """Every state of these phases."""
    return [state for state in State if state.phase in phases]


_ACTIVE = _states(Phase.STARTING, Phase.RUNNING)
_WAITING = _states(Phase.QUEUED, Phase.UNSCHEDULABLE)
_FINISHED = _states(*FINISHED)
_MISSING = [State.MISSING, State.MISSING_AFTER_OUTAGE]
_OUTCOMES = {
    Trigger.RAY_SUCCEEDED: Phase.SUCCEEDED,
    Trigger.RAY_FAILED: Phase.FAILED,
    Trigger.RAY_STOPPED: Phase.STOPPED,
}


Key = tuple[State, Trigger]


def _edges(sources: Iterable[State], trigger: Trigger, target: Phase) -> dict[Key, Phase]:
    return {(source, trigger): target for source in sources}


_INVALID = _states(Phase.INVALID)

TRANSITIONS: Mapping[Key, Phase] = {
    **_edges([s for s in State if not s.phase.active], Trigger.INVALIDATE, Phase.INVALID),
    **_edges([*_ACTIVE, *_FINISHED, *_INVALID], Trigger.SPEC_CHANGED, Phase.QUEUED),
    **_edges([*_ACTIVE, *_WAITING, *_FINISHED, *_INVALID], Trigger.SUSPEND, Phase.SUSPENDED),
    (State.SUSPENDED, Trigger.RESUME): Phase.QUEUED,
    **_edges(_WAITING, Trigger.QUEUE, Phase.QUEUED),
    **_edges(_WAITING, Trigger.HOLD, Phase.QUEUED),
    **_edges(_WAITING, Trigger.WAIT_FOR_VICTIMS, Phase.QUEUED),
    **_edges(_WAITING, Trigger.UNSCHEDULABLE, Phase.UNSCHEDULABLE),
    **_edges(_WAITING, Trigger.ADMIT, Phase.STARTING),
    (State.STARTING, Trigger.SUBMIT_REFUSED): Phase.FAILED,
    **_edges(_ACTIVE, Trigger.RAY_PENDING, Phase.STARTING),
    **_edges(_ACTIVE, Trigger.RAY_RUNNING, Phase.RUNNING),
    # From Invalid too: a spec fixed back to the run that ended meanwhile keeps its outcome.
    **{
        key: target
        for trigger, target in _OUTCOMES.items()
        for key in _edges([*_ACTIVE, *_INVALID], trigger, target)
    },
    **_edges(_ACTIVE, Trigger.ID_CONFLICT, Phase.FAILED),
    # A Starting run missing from Ray is submitted again instead: its id is still free.
    (State.RUNNING, Trigger.JOB_MISSING): Phase.RUNNING,
    (State.RUNNING, Trigger.JOB_MISSING_AFTER_OUTAGE): Phase.RUNNING,
    **_edges(_MISSING, Trigger.REQUEUE_LOST, Phase.QUEUED),
    **_edges(_MISSING, Trigger.LOSE, Phase.LOST),
    **_edges(_states(Phase.RUNNING), Trigger.TIME_OUT, Phase.TIMED_OUT),
    (State.STARTING, Trigger.START_TIMEOUT): Phase.FAILED,
    **_edges([State.FAILED, State.TIMED_OUT], Trigger.RETRY, Phase.QUEUED),
    # Missing: a lost run whose retries are used up (it is still Running while missing).
    **_edges([State.FAILED, State.TIMED_OUT, *_MISSING], Trigger.GIVE_UP, Phase.FAILED),
    **_edges([*_WAITING, State.IN_CYCLE], Trigger.DEPENDENCY_CYCLE, Phase.INVALID),
    (State.IN_CYCLE, Trigger.CYCLE_RESOLVED): Phase.QUEUED,
    # Only a run Ray is running is a victim; never a failure, so back to the queue.
    **_edges(_states(Phase.RUNNING), Trigger.PREEMPT, Phase.QUEUED),
}


def set_fields(body: TaskStatusBody, update: Mapping[str, object]) -> TaskStatusBody:
    """model_copy only if a field really changes: unchanged statuses keep their identity,
    which lets the shell skip them cheaply."""
    for key, value in update.items():
        if getattr(body, key) != value:
            return body.model_copy(update=update)  # it copies: no dict of our own
    return body


def fire(body: TaskStatusBody, trigger: Trigger, update: Mapping[str, object]) -> TaskStatusBody:
    state = state_of(body)
    target = TRANSITIONS.get((state, trigger))
    if target is None:
        raise IllegalTransition(state, trigger)
    # The missing-job timer belongs to the one state it times; any other step ends it.
    missing = trigger in (Trigger.JOB_MISSING, Trigger.JOB_MISSING_AFTER_OUTAGE)
    timer: dict[str, object] = {} if missing else {"missing_since": None}
    if target is not Phase.RUNNING:  # the over-holding timer belongs to a running run
        timer["over_since"] = None
    return set_fields(body, {"phase": target, **timer, **update})


def missing_since(body: TaskStatusBody) -> datetime | None:
    """When Ray stopped listing the run, or None while it is listed."""
    if body.missing_since is not None:
        return body.missing_since
    # Status files written before missingSince existed kept the timer in finishedAt.
    return body.finished_at if body.reason == Reason.JOB_MISSING else None
