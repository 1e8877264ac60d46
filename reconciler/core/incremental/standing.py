"""A plan that stands: the pass whose inputs are those of the last plan, or only the loop's own
writes of it, plans exactly that plan again, so it is not planned.

Two kinds. A still plan (`Plan.still`) changed nothing: while nothing it read changes and its
`still_until` has not passed, a full pass plans it again. A plan that only moved statuses (a
job went PENDING or RUNNING, a queue position moved) is written by the loop, and the next pass
reads those statuses back as changes: planned, that read-back would be a pass of its own for
most jobs on a busy head, and it always plans nothing. The planner is a fixed point of its own
output (tests/unit/core/incremental/test_standing_fixed_point.py): with the same specs, the
same answer from Ray and the plan's statuses written, it plans nothing at any instant from that
pass's `now` up to its read-back deadline. So the read-back stands as the still plan
`read_back` builds, and once read, it is a still plan like any other (`settled`).

Each test costs what changed since the pass before (the caller's `changed`), never every task,
except where the caller could not say what changed (then the versions are compared).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass, replace

from reconciler.core.gates import run_view
from reconciler.core.incremental.keptclaims import recorded_of
from reconciler.core.inputs import Observation
from reconciler.core.planner import Plan
from reconciler.core.task.dependencies import RunView
from specs.task.inputs import TaskInput
from specs.task.models import ConditionType
from specs.task.status import TaskStatus

# No task watched by a dependent.
NOTHING_SHOWN: Mapping[str, RunView] = {}


def quiet_but_statuses(plan: Plan) -> bool:
    """Whether `plan` does nothing but move statuses (and log its events)."""
    return not (
        plan.still
        or plan.submits
        or plan.stops
        or plan.timeouts
        or plan.preemptions
        or plan.deletes
        or plan.delete_statuses
        or plan.fetch_logs
        or plan.refused_deletions
    )


def read_back(
    plan: Plan,
    observed: Observation,
    now: float,
    fast: bool,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    shown: Mapping[str, RunView] = NOTHING_SHOWN,
) -> Plan | None:
    """The plan its read-back would give, as a still plan: the statuses written (the very
    objects), no events, the same summary and scale request, still until its read-back deadline.
    `fast`: the plan is the fast pass's (Memo.fast: plain tasks, Ray answered),
    where the property is shown. `statuses`: those the plan was given. `shown`: what the
    plan's dependents saw of each task their dependencies name (keptgates.Gates.seen).
    None: the read-back must be planned (not the fast pass, the plan acted, it read the clock
    at `now`, it moved the status of a task whose spec it could not use, one to another run of
    an explicit id, or one its dependents saw otherwise)."""
    if not fast or not observed.available or not quiet_but_statuses(plan):
        return None
    if _moved_an_unusable_spec(plan, specs) or _moved_a_run_of_an_id(plan, statuses):
        return None
    if _moved_what_dependents_saw(plan, shown):
        return None
    until = plan.read_back_deadline
    if until is not None and until <= now:
        return None  # it holds at its own instant only
    # A run's start recorded at `now` pins `plan` to its instant, not its read-back: that
    # reads the time written (Plan.read_back_deadline).
    return replace(plan, events=(), write_classes={}, still=True, deadline=until)


def _moved_an_unusable_spec(plan: Plan, specs: Mapping[str, TaskInput]) -> bool:
    """Whether `plan` moved the status of a task whose spec it could not use: its file does
    not parse, or the pass refused a spec that does (an explicit id another task has or claims
    too, a dependency its folder may not see; the status written then says SpecInvalid). Such
    a task's run goes on under its last valid spec; the pass that sees the run end records its
    outcome (Succeeded, Failed, a retry's Queued), and its read-back turns that Invalid: the
    planner is not a fixed point of that output (tests/unit/shell/loop/test_readback_broken.py,
    tests/unit/core/incremental/test_standing_fixed_point.py). Rare, so any move of such a
    task's status has its read-back planned."""
    written = plan.statuses
    for name in plan.write_classes:
        spec = specs.get(name)
        if spec is not None and spec.task is None:
            return True
        status = written.get(name)
        if status is not None and _planned_under_its_last_valid_spec(status):
            return True
    return False


def _planned_under_its_last_valid_spec(status: TaskStatus) -> bool:
    """Whether the pass that wrote `status` planned its task under its last valid spec: the
    SpecInvalid condition, which reconcile_task sets on a run that goes on under a spec the
    pass may not use (and only there)."""
    return any(c.type == ConditionType.SPEC_INVALID for c in status.status.conditions)


def _moved_what_dependents_saw(plan: Plan, shown: Mapping[str, RunView]) -> bool:
    """Whether `plan` wrote a status whose phase or end differs from what its dependents saw
    of it. They see a task's reconciled body, and a stage after the gates (admission: an
    Unschedulable task that fits again is Queued) may move the status written; the read-back
    reconciles from what was written, so its dependents' gates and words move with it."""
    written = plan.statuses
    for name in plan.write_classes:
        seen = shown.get(name)
        status = written.get(name)
        if seen is not None and status is not None and run_view(status.status) != seen:
            return True
    return False


def _moved_a_run_of_an_id(plan: Plan, statuses: Mapping[str, TaskStatus]) -> bool:
    """Whether `plan` moved a status to record another run of an explicit id, or none (a run
    lost from Ray queued again): the claims on an id are judged from the runs the statuses
    read record (keptclaims), so its read-back may judge them otherwise."""
    written = plan.statuses
    for name in plan.write_classes:
        if recorded_of(written.get(name)) != recorded_of(statuses.get(name)):
            return True
    return False


@dataclass(frozen=True)
class Standing:
    """A plan that stands, and what it stands on: the instant, Ray's answer, the caller's
    other inputs (`inputs`: the loop's queue file generation and git revision), the versions,
    specs and statuses read. `written`: the statuses a plan that only moved statuses gave
    (the very objects the loop writes), until the pass that reads them back; None: a still
    plan, which stands while nothing changes."""

    plan: Plan  # still
    at: float
    observed: Observation
    inputs: Hashable
    versions: Mapping[str, Hashable]
    specs: Mapping[str, TaskInput]
    statuses: Mapping[str, TaskStatus]
    written: Mapping[str, TaskStatus] | None = None

    def holds(self, observed: Observation, now: float, inputs: Hashable) -> bool:
        """Whether the plan stands at `now` for that answer from Ray and those inputs, the
        tasks' own inputs aside."""
        until = self.plan.still_until
        return (
            until is not None
            and self.at <= now <= until
            and inputs == self.inputs
            and observed.capacity == self.observed.capacity
            and observed.error == self.observed.error
            and observed.jobs == self.observed.jobs
            and observed.scaling == self.observed.scaling
            and observed.held == self.observed.held
            and observed.ray_available == self.observed.ray_available
        )

    def read_the_same(
        self,
        specs: Mapping[str, TaskInput],
        statuses: Mapping[str, TaskStatus],
        versions: Mapping[str, Hashable],
        changed: Collection[str] | None,
    ) -> bool:
        """Whether the tasks read now are those the plan stands on: nothing `changed` since
        the pass before (a still plan), or only the statuses it wrote, read back (the very
        objects, or equal). `changed` None (not known): the versions and the statuses of
        tasks without a spec are compared, for a still plan; a read-back is then planned."""
        if self.written is None:
            if changed is not None:
                return not changed
            return versions == self.versions and self._same_orphans(specs, statuses)
        if changed is None:
            return False
        written, before = self.written, self.statuses
        for name in changed:
            if specs.get(name) is not self.specs.get(name):
                return False  # a spec read anew
            expected = written.get(name, before.get(name))
            status = statuses.get(name)
            if status is not expected and (status is None or status != expected):
                return False
        return True

    def _same_orphans(
        self, specs: Mapping[str, TaskInput], statuses: Mapping[str, TaskStatus]
    ) -> bool:
        if len(statuses) != len(self.statuses):
            return False
        for name, status in statuses.items():
            if name in specs:
                continue  # its version holds its status
            before = self.statuses.get(name)
            if status is not before and (before is None or status != before):
                return False
        return True

    def settled(
        self,
        versions: Mapping[str, Hashable],
        specs: Mapping[str, TaskInput],
        statuses: Mapping[str, TaskStatus],
    ) -> Standing:
        """The still plan a read of exactly this leaves: the passes after it are compared
        with that read."""
        return replace(self, versions=versions, specs=specs, statuses=statuses, written=None)


def after_plan(
    plan: Plan,
    observed: Observation,
    now: float,
    fast: bool,
    inputs: Hashable,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    versions: Mapping[str, Hashable],
    shown: Mapping[str, RunView] = NOTHING_SHOWN,
) -> Standing | None:
    """What a planned pass leaves to stand: the plan itself if it is still, its read-back if
    it only moved statuses (read_back), else nothing."""
    if plan.still:
        return Standing(plan, now, observed, inputs, versions, specs, statuses)
    still = read_back(plan, observed, now, fast, specs, statuses, shown)
    if still is None:
        return None
    return Standing(still, now, observed, inputs, versions, specs, statuses, plan.statuses)
