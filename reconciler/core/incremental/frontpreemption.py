"""Preemption on the fast pass (core/incremental/fastpass.py): the stage the full pass runs in
admission (preemptions.preempt), over what the fast pass has.

Of the waiting tasks, preemption reads only the fronts: the task each queue's policy would
start next, whether it waits for room, its priority and request, and the queues' states after
fair admission (usage, quotas, shares, the room held for a blocked front): all of it is in the
walk over the fronts. Of the running tasks it reads every run (its priority, start, request,
queue): those are loud, redone every pass. What else it reads is the victims'
(`preemptedBy` in their statuses, kept in `Order.preempted`): a victim whose stopped run is
still live waits out of its queue's walk at its place, and its preemptor waits for it with its
room reserved wherever it stands; a team queue's preemptor whose victims have all stopped is
admitted first, wherever it stands. Those read the whole queue: such a pass is the full one's
(they last until Ray reports the stopped runs gone and the preemptor starts).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from reconciler.core.admission import policies
from reconciler.core.admission.waits import Preempting
from reconciler.core.admit import free_capacity, until_of_age
from reconciler.core.preemption.preempt import stopping_victims
from reconciler.core.preemptions import preempt
from reconciler.core.queues import dispatch as queueing
from reconciler.core.task import lifecycle
from reconciler.core.task.jobs import claim_of
from reconciler.core.task.step import TaskResult
from specs.task.models import ConditionType
from specs.task.status import TaskStatusBody

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


def reads_whole_queue(
    ctx: FastPassContext,
    victims: Mapping[str, TaskStatusBody],
    result_of: Callable[[str], TaskResult],
    present: Collection[str],
) -> bool:
    """Whether a victim's run still stops (preemption.stopping_victims), or, with team
    queues, a preemptor is ready to be admitted first (preemptions.ready): both read the
    whole queue, and the pass is the full one's."""
    if not victims:
        return False
    if stopping_victims(victims, ctx.env.by_task, claim_of):
        return True
    if ctx.queues is None:
        return False
    for name in {body.preempted_by for body in victims.values()}:
        if name is None or name not in present:
            continue
        result = result_of(name)
        if (
            result.waiter is not None
            and lifecycle.state_of(result.body) is lifecycle.State.PREEMPTING
        ):
            return True
    return False


def preempt_fronts(
    ctx: FastPassContext,
    candidates: Sequence[policies.Candidate],
    admission: policies.Admission | queueing.QueueAdmission,
    result_of: Callable[[str], TaskResult],
) -> dict[str, Preempting]:
    """The preemption stage over the walk of the fronts (`candidates`, in the cluster's order,
    with `admission` over them), as `admit` runs it before it places anyone: the victims'
    bodies and conditions, the stops, the decisions and their notes added to `ctx` (before
    any start's); returns what each preemptor waits for. Called with no victim stopping (the
    caller checks `reads_whole_queue`)."""
    setup = ctx.env.preemption
    if not setup.any_on:
        return {}
    tasks = {}
    for candidate in candidates:
        waiter = result_of(candidate.name).waiter
        assert waiter is not None
        tasks[candidate.name] = waiter.task
    free = free_capacity(ctx.obs, ctx.options, ctx.used)
    preempted = preempt(ctx.inputs, tasks, ctx.running, ctx.bodies, candidates, admission, free, {})
    ctx.bodies.update(preempted.bodies)
    for name, wanted in preempted.conds.items():
        ctx.conds[name] = {**ctx.conds.get(name, {}), ConditionType.PREEMPTED: wanted}
    ctx.stops.extend(preempted.stops)
    ctx.preemptions.extend(preempted.preemptions)
    ctx.events.extend(preempted.events)
    ctx.until = min(ctx.until, max(until_of_age(ctx.inputs, ctx.running), ctx.now))
    return dict(preempted.waits)
