"""The preemptions of a pass, recorded: `reconciler.core.preemption.preempt.decide` chooses
who preempts whom; this stage of the pass (reconciler.core.stages) writes each victim's status
(before any stop goes out), the stops, the decisions and their notes, and says what each
preemptor waits for."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.admission import policies
from reconciler.core.admission.waits import Preempting
from reconciler.core.decisions import Event, Preemption, Stop, StopCause
from reconciler.core.preemption import victims
from reconciler.core.preemption.preempt import StoppingVictims, decide
from reconciler.core.preemption.victims import Running, Victim
from reconciler.core.queues import dispatch
from reconciler.core.stages import PassInputs
from reconciler.core.task import lifecycle
from reconciler.core.task.preemptedby import Preemptors, record
from specs.cluster import Capacity
from specs.task.models import Reason
from specs.task.records import Task
from specs.task.status import TaskStatusBody

__all__ = ["Preempted", "preempt", "ready"]


def ready(
    bodies: Mapping[str, TaskStatusBody],
    queued: Collection[str],
    stopping: Mapping[str, StoppingVictims],
    preemptors: Preemptors,
) -> frozenset[str]:
    """Preemptors whose victims have all stopped but that have not started yet: queued, still
    recorded as Preempting, named by some victim (as `preemptors` reads it back), none of whose
    jobs is live. Team queues admit them first, so the room their victims left is theirs (one
    queue needs no help: the preemptor is its policy's next pick)."""
    named = {
        preemptors.of(name, body) for name, body in bodies.items() if body.preempted_by is not None
    }
    return frozenset(
        name
        for name in named
        if name is not None
        and name in queued
        and name not in stopping
        and (body := bodies.get(name)) is not None
        and lifecycle.state_of(body) is lifecycle.State.PREEMPTING
    )


@dataclass(frozen=True)
class Preempted:
    """This pass's preemptions, recorded: what each preemptor waits for, its victims' new
    bodies and conditions (written before any stop goes out), the stops, the decisions and
    their notes, in decision order."""

    waits: Mapping[str, Preempting]  # by preemptor
    bodies: Mapping[str, TaskStatusBody]  # by victim
    conds: Mapping[str, tuple[Reason, str]]  # by victim: its Preempted condition
    stops: Sequence[Stop]
    preemptions: Sequence[Preemption]
    events: Sequence[Event]


def preempt(
    inputs: PassInputs,
    tasks: Mapping[str, Task],
    running: Sequence[Running],
    bodies: Mapping[str, TaskStatusBody],
    queue: Sequence[policies.Candidate],
    admission: policies.Admission | dispatch.QueueAdmission,
    free: Capacity,
    stopping: Mapping[str, StoppingVictims],
    preemptor_bodies: Mapping[str, TaskStatusBody],
    awaits_nodes: frozenset[str] = frozenset(),
) -> Preempted:
    """Only the task a queue's policy would admit next may preempt, and only if it waits for
    resources (or, within its queue, for its quota) and none of its earlier victims is still
    stopping. `decide` chooses; this records it (victims first) and says, by preemptor, what
    it waits for. `stopping`: all of them, also those of preemptors that started meanwhile:
    their victims still stopping are nobody's usage when reclaim asks who borrows.
    `preemptor_bodies`: the statuses of the candidates of `queue` (recorded.record reads
    their uid and run)."""
    setup = inputs.env.preemption
    if not setup.any_on:
        return Preempted({}, {}, {}, [], [], [])
    priorities = {c.name: tasks[c.name].spec.priority for c in queue}
    decisions = decide(setup, queue, admission, free, stopping, running, priorities, inputs.now)
    # `awaits_nodes`: preemptors the autoscaler will serve; they wait for nodes instead.
    decisions = [d for d in decisions if d.preemptor.name not in awaits_nodes]
    visibility = inputs.options.visibility
    waits: dict[str, Preempting] = {}
    victim_bodies: dict[str, TaskStatusBody] = {}
    conds: dict[str, tuple[Reason, str]] = {}
    stops: list[Stop] = []
    preemptions: list[Preemption] = []
    events: list[Event] = []
    for decision in decisions:
        preemptor, chosen = decision.preemptor, decision.victims
        reasons = tuple(_reason(v) for v in chosen)
        names = tuple(v.run.name for v in chosen)
        total = Capacity()
        for victim, reason in zip(chosen, reasons, strict=True):
            total = total + victim.run.request
            name = victim.run.name
            body = bodies[name]
            message = _victim_message(inputs, victim, preemptor, reason, body)
            recorded = record(visibility, name, preemptor.name, preemptor_bodies[preemptor.name])
            victim_bodies[name] = lifecycle.preempt(body, recorded, message)
            conds[name] = (reason, message)
            sid = body.submission_id or ""
            stops.append(Stop(sid, name, StopCause.PREEMPTED, preemptor.name))
        waits[preemptor.name] = Preempting(
            names,
            tuple(v.run.priority for v in chosen),
            total,
            preemptor.request,
            all(v.reclaim for v in chosen),
        )
        reason = next(
            (r for r in (Reason.RECLAIM, Reason.IN_COHORT_FAIR_SHARING) if r in reasons),
            Reason.WITHIN_QUEUE,
        )
        queue_name = decision.queue if inputs.queues is not None else None
        preemptions.append(
            Preemption(preemptor.name, names, reason, decision.free, reasons, queue_name)
        )
        events.append(
            Event(
                logging.INFO,
                Reason.PREEMPTED,
                f"preempted {', '.join(names)} for {preemptor.name} (priority "
                f"{preemptor.priority}{_NOTE.get(reason, '')})",
            )
        )
    return Preempted(waits, victim_bodies, conds, stops, preemptions, events)


_NOTE = {
    Reason.RECLAIM: ", reclaiming lent quota",
    Reason.IN_COHORT_FAIR_SHARING: ", by fair share",
}


def _reason(victim: Victim) -> Reason:
    if victim.shares is not None:
        return Reason.IN_COHORT_FAIR_SHARING
    return Reason.RECLAIM if victim.reclaim else Reason.WITHIN_QUEUE


def _victim_message(
    inputs: PassInputs,
    taken: Victim,
    preemptor: victims.Preemptor,
    reason: Reason,
    body: TaskStatusBody,
) -> str:
    """What the victim's status says: who took its place, and why. Its job holds its
    resources until Ray reports it stopped."""
    victim, victim_queue, queues = taken.run, taken.queue, inputs.queues
    ran = _duration(inputs.now - victim.started)
    why = ""
    if reason is Reason.RECLAIM and queues is not None:
        lender = queues.queue_of(preemptor.name)
        why = f" of {lender}, taking back the quota {victim_queue} borrowed,"
    elif taken.shares is not None and queues is not None:
        mine, theirs = taken.shares
        own = queues.queue_of(preemptor.name)
        if taken.judged is None:
            why = (
                f" of {own} by fair share (its weighted share "
                f"with it running {mine:.3g}, at most {victim_queue}'s {theirs:.3g} after),"
            )
        else:  # nested queues: judged where the two branches meet
            side, other = taken.judged
            why = (
                f" of {own} by fair share between {side} and {other} ({side}'s weighted "
                f"share with it running {mine:.3g}, at most {other}'s {theirs:.3g} after),"
            )
    by = inputs.options.visibility.name_for(victim.name, preemptor.name)
    return (
        f"preempted by {by} (priority {preemptor.priority}){why} after run "
        f"{body.run} had run {ran}; queued again in its old place"
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
