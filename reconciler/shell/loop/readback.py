"""The pass that reads back what the last one wrote, skipped without calling the planner.

A pass whose plan only moved statuses (a job went PENDING or RUNNING, a queue position moved)
writes them, and the next pass reads them back as a change of version: planned, that read-back
would be a pass of its own for most jobs on a busy head, and it always plans nothing
(docs/benchmarks.md). The planner is a fixed point of its own output
(tests/unit/test_readback_still.py): with the same specs, the same answer from Ray and the
plan's statuses written, it plans nothing at any instant from that pass's `now` up to its
deadline. So such a pass leaves a `StillPass` whose versions are those read after its writes,
and the next pass, reading exactly that, is skipped as any still pass is.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

from reconciler.core.planner import Observation, Plan, TaskInput
from reconciler.shell.loop.gitrev import SourceRevision
from reconciler.shell.loop.unchanged import StillPass, Version
from specs.task.status import TaskStatus


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


def as_read_back(
    plan: Plan,
    observed: Observation,
    now: float,
    fast: bool,
    specs: Mapping[str, TaskInput],
) -> Plan | None:
    """The plan its read-back would give, as a still plan: the statuses written (the very
    objects), no events, the same summary and scale request, still until its read-back deadline.
    `fast`: the plan is the fast pass's (incremental.Memo.fast: plain tasks, no preemption,
    Ray answered), where the property is shown; elsewhere a task's words may name another's
    status as it was read (a dependency's), which its read-back rewrites. None: the read-back
    must be planned (not the fast pass, the plan acted, it read the clock at `now`, or it
    moved the status of a task whose file is broken)."""
    if not fast or not observed.available or not quiet_but_statuses(plan):
        return None
    if _moved_a_broken_spec(plan, specs):
        return None
    until = plan.read_back_deadline
    if until is not None and until <= now:
        return None  # it holds at its own instant only
    # A run's start recorded at `now` pins `plan` to its instant, not its read-back: that
    # reads the time written (Plan.read_back_deadline).
    return replace(plan, events=(), write_classes={}, still=True, deadline=until)


def _moved_a_broken_spec(plan: Plan, specs: Mapping[str, TaskInput]) -> bool:
    """Whether `plan` moved the status of a task whose file does not parse. Such a task's run
    goes on under its last valid spec; the pass that sees the run end records its outcome
    (Succeeded, Failed, a retry's Queued), and its read-back turns that Invalid: the planner
    is not a fixed point of that output (tests/unit/test_readback_broken.py). Rare, so any
    move of a broken spec's status has its read-back planned."""
    for name in plan.write_classes:
        spec = specs.get(name)
        if spec is not None and spec.task is None:
            return True
    return False


@dataclass(frozen=True)
class ReadBack:
    """A pass whose plan only moved statuses, all of them written or deferred: `still` holds
    its read-back plan (versions not yet known: those of the next read), `given` the plan's
    statuses and `before` those the pass read (an orphan's, or one flushed from an earlier
    deferral, is there)."""

    still: StillPass
    given: Mapping[str, TaskStatus]
    before: Mapping[str, TaskStatus]

    def reads_back(
        self, statuses: Mapping[str, TaskStatus], changes: AbstractSet[str] | None
    ) -> bool:
        """Whether the statuses read now are exactly what the pass wrote: each one changed
        since (`changes`, the store's names; None: unknown) equals the plan's, or for a name
        the plan did not give, the one read before."""
        if changes is None:
            return False
        for name in changes:
            expected = self.given.get(name, self.before.get(name))
            status = statuses.get(name)
            if status is not expected and (status is None or status != expected):
                return False
        return True

    def settled(self, versions: Mapping[str, Version], statuses: Mapping[str, int]) -> StillPass:
        """The still pass the skipped read-back leaves: what it read, generation for
        generation, so that the passes after it are compared with that."""
        return replace(self.still, versions=versions, statuses=statuses)


def read_back_of(
    plan: Plan,
    specs: Mapping[str, TaskInput],
    before: Mapping[str, TaskStatus],
    observed: Observation,
    now: float,
    fast: bool,
    queues: int,
    revision: SourceRevision | None,
) -> ReadBack | None:
    """What the pass that reads back `plan`'s writes may skip to, or None (as_read_back)."""
    still = as_read_back(plan, observed, now, fast, specs)
    if still is None:
        return None
    # The versions and statuses of the read-back's own read are filled in by ReadBack.settled.
    return ReadBack(
        StillPass(
            still,
            now,
            observed.jobs,
            observed.capacity,
            observed.error,
            queues,
            revision,
            {},
            {},
            observed.scaling,
        ),
        plan.statuses,
        before,
    )
