"""A running run that holds more than it declares: the Overusing condition, and what its
queue's `overuse:` policy does about it (specs/queues/config.py, Overuse). Pure.

A run is over when Ray says it holds more than it declares, on some resource, by more than
MARGIN_SHARE of its declaration and by at least MARGIN_FLOOR: a few hundred MiB of a
worker's overhead is not a run that ignores its declaration. The status records since when
(`overSince`). Held over for CONFIRM_SECONDS (a census is taken every 15 s or more, so one
reading alone never flags a run), the task lists the condition, with the numbers. It clears
when the run holds within its declaration again or ends; between the two (over its
declaration but within the margin) the record stands, so a run that hovers at the margin
does not flap. A run Ray's holdings do not show (not read, or started since) is not judged:
its record stands until a census shows it again.

The policy: `Charge` counts what the run holds (task.jobs.charged), `Warn` counts what it
declares and only lists the condition, `Stop` also stops the run once it has been over for
CONFIRM_SECONDS and then its queue's grace: a preemption-like stop (lifecycle.stop_overusing),
queued again in its old place, counted in `preemptions`, once per run since the next run
starts with no record.
"""

from __future__ import annotations

from reconciler.core.resources import amount, unit
from reconciler.core.task import lifecycle
from reconciler.core.task.jobs import request_of
from reconciler.core.task.step import TaskStep
from reconciler.core.timestamps import to_epoch
from specs.cluster import Capacity
from specs.task.models import ConditionType, Reason
from specs.task.records import Task
from specs.task.status import TaskStatusBody

__all__ = [
    "CONFIRM_SECONDS",
    "MARGIN_FLOOR",
    "MARGIN_SHARE",
    "beyond_margin",
    "judge",
    "keep_stopped",
    "overuse_words",
    "stopped_for_it",
]

MARGIN_SHARE = 0.10
MARGIN_FLOOR = Capacity(0.5, 1.0, 256 * 1024**2)
CONFIRM_SECONDS = 30.0
_RESOURCES = ("cpu", "gpu", "memory")
_EPS = 1e-9


def _of(capacity: Capacity, resource: str) -> float:
    value: float = getattr(capacity, resource)
    return value


def beyond_margin(declared: Capacity, held: Capacity) -> bool:
    """Whether `held` exceeds `declared` on some resource by more than MARGIN_SHARE of it and
    by at least MARGIN_FLOOR."""
    for resource in _RESOURCES:
        over = _of(held, resource) - _of(declared, resource)
        share = MARGIN_SHARE * _of(declared, resource)
        if over > share + _EPS and over >= _of(MARGIN_FLOOR, resource) - _EPS:
            return True
    return False


def overuse_words(declared: Capacity, held: Capacity) -> str:
    """Each resource held beyond its declaration: 'holds 8 CPU, declared 1'."""
    parts = [
        f"holds {amount(r, _of(held, r))} {unit(r)}, declared {amount(r, _of(declared, r))}"
        for r in _RESOURCES
        if _of(held, r) > _of(declared, r) + _EPS
    ]
    return "; ".join(parts)


def stopped_for_it(body: TaskStatusBody) -> bool:
    """Whether the status lists the condition a Stop for holding over wrote."""
    return any(
        c.type == ConditionType.OVERUSING and c.reason == Reason.OVERUSE_STOP
        for c in body.conditions
    )


def keep_stopped(step: TaskStep, body: TaskStatusBody) -> None:
    """A task whose run was stopped for holding over keeps saying so, as the stop wrote it,
    while it waits for its next run (its reason is then why it waits)."""
    if not body.conditions:
        return
    for cond in body.conditions:
        if cond.type == ConditionType.OVERUSING and cond.reason == Reason.OVERUSE_STOP:
            step.conds[ConditionType.OVERUSING] = (Reason.OVERUSE_STOP, cond.message)


def judge(step: TaskStep, name: str, task: Task, body: TaskStatusBody) -> TaskStatusBody:
    """A Running run's record of holding over, its condition, and its queue's Stop."""
    sid = body.submission_id
    held = step.obs.held.get(sid) if sid else None
    if held is None:
        return body
    declared = request_of(task)
    if held.fits_in(declared):
        return lifecycle.note_over(body, None)
    if body.over_since is None:
        if not beyond_margin(declared, held):
            return body
        body = lifecycle.note_over(body, step.recorded(None))
    since = body.over_since
    assert since is not None
    start = since.timestamp()
    if not step.elapsed(start, CONFIRM_SECONDS, strictly=False):
        return body
    policy = step.env.overuse_of(name)
    words = overuse_words(declared, held)
    if policy.mode == "Stop" and step.elapsed(
        start, CONFIRM_SECONDS + policy.grace_seconds, strictly=False
    ):
        ran = step.now - (to_epoch(body.started_at) or start)
        message = (
            f"stopped run {body.run}: {words} (overuse: Stop, over for "
            f"{CONFIRM_SECONDS + policy.grace_seconds:g}s, after running {ran:.0f}s); "
            "queued again in its old place"
        )
        step.note(Reason.OVERUSING, f"stopped {name}: {words}")
        step.conds[ConditionType.OVERUSING] = (Reason.OVERUSE_STOP, message)
        return lifecycle.stop_overusing(body, message)
    note = {"Charge": "counted as held", "Warn": "counted as declared"}.get(policy.mode)
    if note is None:
        note = f"stopped {policy.grace_seconds:g}s after it was flagged (overuse: Stop)"
    step.conds[ConditionType.OVERUSING] = (Reason.OVERUSING, f"{words}; {note}")
    return body
