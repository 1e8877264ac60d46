"""Preemption on the fast pass (core/incremental/fastpass.py): the stage the full pass runs in
admission (preemptions.preempt), over what the fast pass has.

Of the waiting tasks, preemption reads only the fronts: the task each queue's policy would
start next, whether it waits for room, its priority and request, and the queues' states after
fair admission (usage, quotas, shares, the room held for a blocked front): all of it is in the
walk over the fronts. Of the running tasks it reads every run (its priority, start, request,
queue): those are loud, redone every pass. What else it reads is the victims'
(`preemptedBy` in their statuses, kept in `Order.preempted`): a victim whose stopped run is
still live waits out of its queue's walk at its place, and its preemptor waits for it with its
room reserved wherever it stands: those read the whole queue, and such a pass is the full
one's (until Ray reports the stopped runs gone). A team queue's preemptor whose victims have
all stopped is admitted first (`ready`): fair admission reads that only of its queues' picks,
which lie in the walk. A task that waits as a preemptor or a victim does is placed again
wherever it stands, once its wait is admission's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from reconciler.core.admission import policies
from reconciler.core.admission.waits import Preempting
from reconciler.core.admit import charged_claims, free_capacity, until_of_age
from reconciler.core.preemption.preempt import stopping_victims
from reconciler.core.preemptions import preempt
from reconciler.core.queues import dispatch
from reconciler.core.task import lifecycle
from reconciler.core.task.preemptedby import Preemptors
from reconciler.core.task.step import TaskResult
from specs.task.models import ConditionType, Reason
from specs.task.status import TaskStatus, TaskStatusBody

if TYPE_CHECKING:
    from reconciler.core.fastcontext import FastPassContext


def victims_of(
    preempted: Collection[str],
    results: Mapping[str, TaskResult],
    present: Collection[str],
    result_of: Callable[[str], TaskResult],
) -> dict[str, TaskStatusBody]:
    """Every present task whose body names its preemptor, with that body: those kept as such
    (`preempted`) and not redone, and the redone ones (`results`) whose body says so."""
    found = {
        name: body
        for name in preempted
        if name not in results
        and name in present
        and (body := result_of(name).body).preempted_by is not None
    }
    found.update(
        (name, result.body)
        for name, result in results.items()
        if result.body.preempted_by is not None
    )
    return found


def preemptors(
    ctx: FastPassContext,
    marked: Collection[str],
    result_of: Callable[[str], TaskResult],
    present: Collection[str],
) -> Preemptors:
    """Reads back the victims' preemptors, as admission does over every task: a task whose
    status waits as a preemptor is `marked` (kept as bearing a preemption, or redone)."""
    return Preemptors(
        ctx.options.visibility,
        lambda: [(name, result_of(name).body) for name in sorted(marked) if name in present],
    )


def stopping(
    ctx: FastPassContext, victims: Mapping[str, TaskStatusBody], preemptors: Preemptors
) -> bool:
    """Whether a victim's stopped run is still live (preemption.stopping_victims): it waits
    out of its queue's walk at its place, and its preemptor's room is reserved wherever that
    stands; both read the whole queue, and the pass is the full one's."""
    if not victims:
        return False
    held = charged_claims(ctx.obs)
    return bool(stopping_victims(victims, ctx.env.by_task, held, preemptors.key_of))


def ready(
    victims: Mapping[str, TaskStatusBody],
    result_of: Callable[[str], TaskResult],
    present: Collection[str],
    preemptors: Preemptors,
) -> frozenset[str]:
    """The preemptors whose victims have all stopped, still waiting as preemptors
    (preemptions.ready, with no victim stopping): team queues admit them first."""
    named = {preemptors.of(name, body) for name, body in victims.items()}
    return frozenset(
        name
        for name in named
        if name is not None
        and name in present
        and (result := result_of(name)).waiter is not None
        and lifecycle.state_of(result.body) is lifecycle.State.PREEMPTING
    )


def marked(result: TaskResult | None, status: TaskStatus | None) -> bool:
    """Whether a task's body names its preemptor, or its status waits as a preemptor or a
    victim does (Preempting, Preempted): a pass places it again wherever it stands, as the
    full pass would (its wait is admission's once its victims or its run stopped)."""
    if result is not None and result.body.preempted_by is not None:
        return True
    return status is not None and status.status.reason in _PREEMPTION_WAITS


_PREEMPTION_WAITS = frozenset({Reason.PREEMPTING, Reason.PREEMPTED})


def preempt_fronts(
    ctx: FastPassContext,
    candidates: Sequence[policies.Candidate],
    admission: policies.Admission | dispatch.QueueAdmission,
    result_of: Callable[[str], TaskResult],
) -> dict[str, Preempting]:
    """The preemption stage over the walk of the fronts (`candidates`, in the cluster's order,
    with `admission` over them), as `admit` runs it before it places anyone: the victims'
    bodies and conditions, the stops, the decisions and their notes added to `ctx` (before
    any start's); returns what each preemptor waits for. Called with no victim stopping (the
    caller checks `stopping`)."""
    setup = ctx.env.preemption
    if not setup.any_on:
        return {}
    tasks = {}
    for candidate in candidates:
        waiter = result_of(candidate.name).waiter
        assert waiter is not None
        tasks[candidate.name] = waiter.task
    free = free_capacity(ctx.obs, ctx.options, ctx.used, ctx.unobserved)
    waiting = {candidate.name: result_of(candidate.name).body for candidate in candidates}
    preempted = preempt(
        ctx.inputs, tasks, ctx.running, ctx.bodies, candidates, admission, free, {}, waiting
    )
    ctx.bodies.update(preempted.bodies)
    for name, wanted in preempted.conds.items():
        ctx.conds[name] = {**ctx.conds.get(name, {}), ConditionType.PREEMPTED: wanted}
    ctx.stops.extend(preempted.stops)
    ctx.preemptions.extend(preempted.preemptions)
    ctx.events.extend(preempted.events)
    ctx.until = min(ctx.until, max(until_of_age(ctx.inputs, ctx.running), ctx.now))
    return dict(preempted.waits)
