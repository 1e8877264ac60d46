"""Delegation bounded by the parent: a queue's own `_queues.yaml` (`team-a/_queues.yaml`, a file
its team can write, by hand or through `PUT /config`) divides what its parent grants and never
widens it, as in Slurm's account hierarchy (a child's limits are at most its parent's) and
Kueue's cohorts. Every field that gives a queue power over others is bounded here, where the
tree is read, so the planner only ever sees bounded values:

- `nominalQuota`: the sub-queues a file lists share what their parent has left once the
  queues listed elsewhere took theirs; asking more scales them down together, per resource;
- `borrowingLimit`: at most what the parent may ever hold, less the sub-queue's nominal quota;
- `maxRunning`, `maxQueued`: at most the nearest enclosing queue's;
- `preemption`: never more than the parent's own, field by field (`withinQueue`,
  `reclaimWithinCohort`, `gracePeriodSeconds`, `minRuntimeSeconds` at most the parent's;
  `minPreemptorPriority` at least the parent's; `maxPerTask` at least the parent's, 0 being
  no limit). A field left out takes its default, bounded the same way;
- `overuse`: never laxer than the parent's (`Warn` < `Charge` < `Stop`), and under `Stop`,
  `overuseGraceSeconds` at most the parent's.

`weight` and `lendingLimit` are left as written: a sub-queue's weight is weighed only against
its siblings', and a sub-queue lends only to its siblings (what its team lends to other teams
is the parent's idle quota under the parent's `lendingLimit`). A bounded value is in force and
the file stays valid; each is reported (`Bounded`) with the file, line and field, so a team's
ambitious file never stops its own healthy work nor reaches another team's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specs.cluster import Capacity
from specs.queues.config import (
    DEFAULT_QUEUE,
    OVERUSE_STRICTNESS,
    UNLIMITED,
    Limit,
    PreemptionConfig,
    QueueConfig,
    QueueEntry,
    Quota,
)
from specs.task.errors import SpecError
from specs.task.quantity import format_memory
from specs.yamlio.errors import Problem

DEFAULT_PREEMPTION = PreemptionConfig(
    within_queue="Never",
    reclaim_within_cohort="Never",
    grace_period_seconds=30.0,
    min_runtime_seconds=0.0,
    min_preemptor_priority=0,
    max_per_task=3,
)
"""What a field left out of a `preemption:` block means: the planner settings' defaults, which
the planner reads when a queue file is in force (tests pin that the two agree)."""

_RESOURCES = ("cpu", "gpu", "memory")
_EPS = 1e-9
_RANK = {"Never": 0, "LowerPriority": 1, "Any": 2}


@dataclass(frozen=True)
class Bounded:
    """One field of a queue's own file that asked for more than its parent grants: what the
    file wrote, and what is in force instead. `note` places it (file, line, field, message)."""

    queue: str
    field: str  # under the queue's entry: preemption.reclaimWithinCohort, nominalQuota.cpu
    written: str
    in_force: str
    note: SpecError

    def document(self) -> dict[str, str]:
        return {
            "field": self.field,
            "written": self.written,
            "inForce": self.in_force,
            "message": str(self.note),
        }


@dataclass(frozen=True)
class _Found:
    """A bounded field before it is placed on its line."""

    index: int  # in the file's spec.queues
    queue: str
    field: tuple[str, ...]
    written: str
    in_force: str
    grants: str  # what the parent allows, in words

    @property
    def problem(self) -> Problem:
        return (("spec", "queues", self.index, *self.field), self.message)

    @property
    def message(self) -> str:
        return (
            f"{self.written} goes beyond what its parent grants ({self.grants}); "
            f"in force: {self.in_force}"
        )


Locate = Callable[[Sequence[Problem]], list[SpecError]]


def resolved(block: PreemptionConfig) -> PreemptionConfig:
    """The block with every field set: one left out takes its default."""
    return PreemptionConfig(
        **{
            name: value if (value := getattr(block, name)) is not None else default
            for name, default in DEFAULT_PREEMPTION
        }
    )


def bound_entries(
    tree: QueueConfig, entries: Sequence[QueueEntry], locate: Locate
) -> tuple[list[QueueEntry], list[Bounded]]:
    """`entries`, the queues one team's file lists, bounded by their parents in `tree` (the
    queues read so far, themselves bounded) and by each other (a file may nest in itself):
    the entries in force, in the file's order, and each field that was bounded. `locate`
    places problems on the file's lines."""
    combined = tree.model_copy(
        update={"spec": tree.spec.model_copy(update={"queues": [*tree.spec.queues, *entries]})}
    )
    in_force: dict[str, QueueEntry] = {entry.name: entry for entry in tree.spec.queues}
    mine = {entry.name for entry in entries}
    bounded: dict[int, QueueEntry] = {}
    found: list[_Found] = []
    depth = {index: combined.depth_of(entry.name) for index, entry in enumerate(entries)}
    for level in sorted(set(depth.values())):
        group = [index for index, d in depth.items() if d == level]
        parents: dict[str, list[int]] = {}
        for index in group:
            parent = combined.parent_of(entries[index].name)
            if parent is not None:  # always: a team's file lists only folders under its own
                parents.setdefault(parent, []).append(index)
        for parent, indices in parents.items():
            others = [
                q
                for q in in_force.values()
                if q.name not in mine and combined.parent_of(q.name) == parent
            ]
            division = _divided(in_force[parent], others, [entries[i] for i in indices])
            for index, quota in zip(indices, division.quotas, strict=True):
                entry = entries[index]
                found.extend(_quota_found(index, entry, quota, parent, division))
                kept, more = _bound_one(
                    index,
                    entry.model_copy(update={"nominal_quota": quota}),
                    parent,
                    combined,
                    in_force,
                )
                found.extend(more)
                bounded[index] = kept
                in_force[entry.name] = kept
    notes = locate([f.problem for f in found]) if found else []
    return (
        [bounded.get(index, entry) for index, entry in enumerate(entries)],
        [
            Bounded(f.queue, ".".join(f.field), f.written, f.in_force, note)
            for f, note in zip(found, notes, strict=True)
        ],
    )


@dataclass(frozen=True)
class _Division:
    """A parent's nominal quota divided among the sub-queues one file lists under it."""

    quotas: list[Quota]  # in force, in the order asked
    left: Capacity  # what the parent had left beside its sub-queues listed elsewhere
    asked: Capacity  # what the file's sub-queues asked together


def _divided(
    parent: QueueEntry, others: Sequence[QueueEntry], asking: Sequence[QueueEntry]
) -> _Division:
    """The nominal quotas of `asking`, scaled down together where they ask more of a resource
    than `parent` has left beside its sub-queues listed elsewhere (`others`)."""
    amounts: dict[str, list[float]] = {}
    left: dict[str, float] = {}
    asked: dict[str, float] = {}
    for resource in _RESOURCES:
        taken = sum(_of(q.nominal_quota, resource) for q in others)
        left[resource] = max(_of(parent.nominal_quota, resource) - taken, 0.0)
        each = [_of(q.nominal_quota, resource) for q in asking]
        asked[resource] = sum(each)
        over = asked[resource] > left[resource] + _EPS
        factor = left[resource] / asked[resource] if over else 1.0
        amounts[resource] = [a * factor for a in each]
    quotas = [
        Quota(
            cpu=amounts["cpu"][i],
            gpu=amounts["gpu"][i],
            memory=math.floor(amounts["memory"][i]),
        )
        for i in range(len(asking))
    ]
    return _Division(quotas, Capacity(**left), Capacity(**asked))


def _quota_found(
    index: int, entry: QueueEntry, quota: Quota, parent: str, division: _Division
) -> list[_Found]:
    found = []
    for resource in _RESOURCES:
        written, kept = _of(entry.nominal_quota, resource), _of(quota, resource)
        if kept < written - _EPS:
            left = _amount(resource, getattr(division.left, resource))
            asked = _amount(resource, getattr(division.asked, resource))
            grants = (
                f"{parent} has {left} left for the sub-queues this file lists, which ask "
                f"{asked}: each gets its share"
            )
            found.append(
                _Found(
                    index,
                    entry.name,
                    ("nominalQuota", resource),
                    _amount(resource, written),
                    _amount(resource, kept),
                    grants,
                )
            )
    return found


def _bound_one(
    index: int,
    entry: QueueEntry,
    parent: str,
    tree: QueueConfig,
    in_force: Mapping[str, QueueEntry],
) -> tuple[QueueEntry, list[_Found]]:
    """One sub-queue's preemption, borrowing limit, maxRunning and maxQueued, bounded."""
    found: list[_Found] = []

    def note(field: tuple[str, ...], written: str, kept: str, grants: str) -> None:
        found.append(_Found(index, entry.name, field, written, kept, grants))

    preemption = _bound_preemption(entry, in_force[parent].preemption, parent, note)
    borrowing = _bound_borrowing(entry, _ceiling(parent, tree, in_force), parent, note)
    update: dict[str, Any] = {"preemption": preemption, "borrowing_limit": borrowing}
    update.update(_bound_overuse(entry, in_force[parent], parent, note))
    for name, word in (("max_running", "maxRunning"), ("max_queued", "maxQueued")):
        written = getattr(entry, name)
        most, holder = _nearest_limit(parent, name, tree, in_force)
        if written is not None and most is not None and written > most:
            note((word,), str(written), str(most), f"{word} {most} of {holder}")
            update[name] = most
    return entry.model_copy(update=update), found


Note = Callable[[tuple[str, ...], str, str, str], None]


def _bound_overuse(entry: QueueEntry, above: QueueEntry, parent: str, note: Note) -> dict[str, Any]:
    """`overuse` never laxer than the parent's (Warn < Charge < Stop), and under Stop,
    `overuseGraceSeconds` never longer: a team may hold its runs to their declarations more
    strictly than its parent does, never less. A field left out takes the parent's bound too."""
    mine, theirs = entry.overuse_policy(), above.overuse_policy()
    kept: dict[str, Any] = {}
    mode = mine.mode
    if OVERUSE_STRICTNESS[mine.mode] < OVERUSE_STRICTNESS[theirs.mode]:
        mode = theirs.mode
        kept["overuse"] = mode
        if entry.overuse is not None:
            note(("overuse",), mine.mode, mode, f"{parent} has overuse {mode}")
    if mode == "Stop" and theirs.mode == "Stop" and mine.grace_seconds > theirs.grace_seconds:
        kept["overuse_grace_seconds"] = theirs.grace_seconds
        if entry.overuse_grace_seconds is not None:
            bound = _text(theirs.grace_seconds)
            note(
                ("overuseGraceSeconds",),
                _text(mine.grace_seconds),
                bound,
                f"{parent} has overuseGraceSeconds {bound}",
            )
    return kept


def _bound_preemption(
    entry: QueueEntry, above: PreemptionConfig, parent: str, note: Note
) -> PreemptionConfig:
    """Field by field, never more power than the parent's own block (defaults filled in)."""
    mine, theirs = resolved(entry.preemption), resolved(above)
    kept: dict[str, Any] = {}
    for name, alias, wider in _PREEMPTION_FIELDS:
        value, bound = getattr(mine, name), getattr(theirs, name)
        if wider(value, bound):
            kept[name] = bound
            if getattr(entry.preemption, name) is not None:  # written, not a default
                note(
                    ("preemption", alias),
                    _text(value),
                    _text(bound),
                    f"{parent} has {alias} {_text(bound)}",
                )
        else:
            kept[name] = value
    return PreemptionConfig(**kept)


def _fewer_spared(value: int, bound: int) -> bool:
    """maxPerTask: a lower limit spares a task sooner (0: never spared)."""
    spared_after = math.inf if value == 0 else value
    parent_after = math.inf if bound == 0 else bound
    return spared_after < parent_after


_PREEMPTION_FIELDS: tuple[tuple[str, str, Callable[[Any, Any], bool]], ...] = (
    ("within_queue", "withinQueue", lambda v, b: _RANK[v] > _RANK[b]),
    ("reclaim_within_cohort", "reclaimWithinCohort", lambda v, b: _RANK[v] > _RANK[b]),
    ("grace_period_seconds", "gracePeriodSeconds", lambda v, b: v > b),
    ("min_runtime_seconds", "minRuntimeSeconds", lambda v, b: v > b),
    ("min_preemptor_priority", "minPreemptorPriority", lambda v, b: v < b),
    ("max_per_task", "maxPerTask", _fewer_spared),
)
"""(field, its name in the file, whether a value gives more power than the parent's bound)."""


def _ceiling(queue: str, tree: QueueConfig, in_force: Mapping[str, QueueEntry]) -> Capacity:
    """The most a queue may ever hold: its nominal quota plus its borrowingLimit, within
    every enclosing queue's."""
    entry = in_force[queue]
    own = entry.nominal_quota.capacity() + entry.borrowing_limit.capacity()
    parent = tree.parent_of(queue)
    if parent is None or parent not in in_force:
        return own
    outer = _ceiling(parent, tree, in_force)
    return Capacity(min(own.cpu, outer.cpu), min(own.gpu, outer.gpu), min(own.memory, outer.memory))


def _bound_borrowing(entry: QueueEntry, ceiling: Capacity, parent: str, note: Note) -> Limit:
    kept: dict[str, Any] = {}
    for resource in _RESOURCES:
        written = getattr(entry.borrowing_limit, resource)
        most = getattr(ceiling, resource) - _of(entry.nominal_quota, resource)
        if written is not None and most != UNLIMITED and written > most + _EPS:
            most = max(most, 0.0)
            value: float | int = math.floor(most) if resource == "memory" else most
            kept[resource] = value
            note(
                ("borrowingLimit", resource),
                _amount(resource, written),
                _amount(resource, value),
                f"{parent} may hold at most {_amount(resource, getattr(ceiling, resource))}",
            )
        else:
            kept[resource] = written
    return Limit(**kept)


def _nearest_limit(
    queue: str, name: str, tree: QueueConfig, in_force: Mapping[str, QueueEntry]
) -> tuple[int | None, str]:
    """The smallest `max_running` (or `max_queued`) of `queue` and the queues it lies in."""
    most: int | None = None
    holder = queue
    current: str | None = queue
    while current is not None and current in in_force:
        value = getattr(in_force[current], name)
        if value is not None and (most is None or value < most):
            most, holder = value, current
        current = tree.parent_of(current)
    return most, holder


def _of(quota: Quota, resource: str) -> float:
    return float(getattr(quota, resource))


def _amount(resource: str, value: float) -> str:
    if resource == "memory":
        return format_memory(round(value))
    return f"{value:.4g} {resource.upper()}"


def _text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# --- what each queue may do, as shown by `rayqueue queues` and GET /queues ---------------------


def effective_policy(
    config: QueueConfig, bounded: Sequence[Bounded] = ()
) -> dict[str, dict[str, Any]]:
    """Per queue, what it may do once bounded: its whole preemption block (defaults filled
    in), its borrowing and lending limits (a resource without a limit left out) and, where
    its own file asked for more, `bounded`: each field, what was written, what is in force."""
    blocks: dict[str, dict[str, Any]] = {}
    entries: list[tuple[str, QueueEntry | None]] = [(q.name, q) for q in config.spec.queues]
    entries.append((DEFAULT_QUEUE, None))
    for name, entry in entries:
        sharing = entry if entry is not None else config.spec.default
        block = resolved(sharing.preemption)
        blocks[name] = {
            "preemption": {alias: getattr(block, field) for field, alias, _ in _PREEMPTION_FIELDS},
            "borrowingLimit": _limits(sharing.borrowing_limit),
            "lendingLimit": _limits(sharing.lending_limit),
            "overuse": {
                "mode": sharing.overuse_policy().mode,
                "graceSeconds": sharing.overuse_policy().grace_seconds,
            },
        }
    for item in bounded:
        if item.queue in blocks:
            blocks[item.queue].setdefault("bounded", []).append(item.document())
    return blocks


def _limits(limit: Limit) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for resource in _RESOURCES:
        value = getattr(limit, resource)
        if value is not None:
            out[resource] = format_memory(value) if resource == "memory" else value
    return out
