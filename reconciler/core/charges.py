"""What the cluster holds in fact: the free room when jobs hold more than they declare, and
the words for a task that waits for it. Pure.

Nothing holds a Ray job to the resources its spec declares, so each live job is charged the
more of what it declares and what Ray says it holds (task.jobs.charged): our runs where their
request becomes a claim (task.runs.keep_active), so admission, quotas, shares, backfill's
estimate and preemption read one figure; our stray jobs (cleanup); and jobs not of this queue
(`room`), which count by what they hold whenever Ray's holdings show them. The free room is
then never more than what Ray itself reports available, less what Ray's holdings do not show
yet (Holdings.unobserved: runs not started, or started since they were read), plus what the
jobs that ended since then held. Without holdings and Ray's report, the room is what it was
before either was read: the capacity less what is declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from reconciler.core.admission import policies
from reconciler.core.admission.waits import HeldInFact, OverHolder, Shortfall, Waiting
from reconciler.core.inputs import Observation
from reconciler.core.queues import dispatch
from reconciler.core.task.jobs import NO_CHARGE, claim_of, foreign_charge, foreign_claim
from specs.cluster import META_QUEUE, META_TASK, Capacity
from specs.settings.process import PlanOptions

__all__ = ["InFact", "Room", "explain", "room"]

_EPS = 1e-9
_RESOURCES = ("cpu", "gpu", "memory")


def _of(capacity: Capacity, resource: str) -> float:
    value: float = getattr(capacity, resource)
    return value


@dataclass(frozen=True)
class InFact:
    """How much more room the declarations alone would leave (`beyond`, per resource), and
    why: by resource, the job that holds the most beyond its declaration (`holders`), and
    what Ray reports available (`available`; None: not read)."""

    beyond: Capacity
    holders: Mapping[str, OverHolder]
    available: Capacity | None

    def lack(self, lack: Shortfall) -> Shortfall | HeldInFact:
        """`lack`, or the same wait said as the cluster held in fact: when what it asks would
        fit what the declarations alone leave free."""
        resource = lack.resource
        beyond = _of(self.beyond, resource)
        if beyond <= _EPS or lack.asked > lack.free + beyond + _EPS:
            return lack
        available = None if self.available is None else _of(self.available, resource)
        holder = self.holders.get(resource)
        return HeldInFact(resource, lack.asked, lack.free, holder, available)


@dataclass(frozen=True)
class Room:
    """What admission may give out (`free`), and how the cluster is held in fact beyond what
    its jobs declare (`in_fact`; None: it is not)."""

    free: Capacity
    in_fact: InFact | None


def room(obs: Observation, options: PlanOptions, used: Capacity, unobserved: Capacity) -> Room:
    """The free room: the capacity less what our runs are charged (`used`, of which
    `unobserved` Ray's holdings do not show) and what other jobs are charged, never more than
    Ray's report of what is available allows."""
    capacity = obs.capacity
    assert capacity is not None
    jobs, held = obs.jobs or {}, obs.held
    counted = options.count_foreign_jobs
    if counted or held:
        for sid, job in jobs.items():
            if job.terminal or job.metadata.get(META_QUEUE) == options.queue_id:
                continue
            charge = foreign_charge(job, counted, held)
            used = used + charge
            if sid not in held:
                unobserved = unobserved + charge
    unlisted = sorted(sid for sid in held if sid not in jobs)
    for sid in unlisted:  # a holder Ray lists no job for: a driver connected directly
        used = used + held[sid]
    free = capacity - used
    if obs.ray_available is None and not held:
        return Room(free, None)
    cut = NO_CHARGE
    if obs.ray_available is not None:
        ended = [sid for sid in sorted(held) if sid in jobs and jobs[sid].terminal]
        fact = sum((held[sid] for sid in ended), obs.ray_available) - unobserved
        bounded = _least(free, fact)
        cut, free = free - bounded, bounded
    return Room(free, _in_fact(obs, options, unlisted, cut))


def _least(one: Capacity, other: Capacity) -> Capacity:
    return Capacity(min(one.cpu, other.cpu), min(one.gpu, other.gpu), min(one.memory, other.memory))


def _in_fact(
    obs: Observation, options: PlanOptions, unlisted: list[str], cut: Capacity
) -> InFact | None:
    """What the charges take beyond the declarations (`cut`: what Ray's report takes beyond
    the charges), and who holds the most beyond its declaration, per resource."""
    jobs, held = obs.jobs or {}, obs.held
    beyond = cut
    holders: dict[str, OverHolder] = {}
    most: dict[str, float] = {}  # by resource: the holder's amount beyond what it is counted
    for sid in sorted(held):
        job = jobs.get(sid)
        if job is None:
            name, ours, declared, counted = sid, False, NO_CHARGE, NO_CHARGE
        elif job.terminal:
            continue
        elif job.metadata.get(META_QUEUE) == options.queue_id:
            name, ours = job.metadata.get(META_TASK) or sid, True
            declared = counted = claim_of(job)
        else:
            name, ours, declared = sid, False, foreign_claim(job)
            counted = declared if options.count_foreign_jobs else NO_CHARGE
        holds = held[sid]
        over = Capacity(*(max(_of(holds, r) - _of(counted, r), 0.0) for r in _RESOURCES))
        beyond = beyond + over
        for resource in _RESOURCES:
            amount = _of(over, resource)
            if amount > most.get(resource, _EPS):
                most[resource] = amount
                holders[resource] = OverHolder(
                    name, ours, _of(holds, resource), _of(declared, resource)
                )
    if all(_of(beyond, r) <= _EPS for r in _RESOURCES):
        return None
    return InFact(beyond, holders, obs.ray_available)


def explain(
    admission: policies.Admission | dispatch.QueueAdmission, in_fact: InFact | None
) -> None:
    """Say of each task that waits for resources the charges took whether it would start on
    what the declarations alone leave (InFact.lack), in `admission` itself."""
    if in_fact is None:
        return
    waiting = admission.waiting
    for name, wait in waiting.items():
        if isinstance(wait.lacks, Shortfall):
            said = in_fact.lack(wait.lacks)
            if said is not wait.lacks:
                waiting[name] = _said(wait, said)
    if isinstance(admission, policies.Admission):
        tail = admission.tail
        if tail is not None and isinstance(tail.lack, Shortfall):
            admission.tail = tail._replace(lack=in_fact.lack(tail.lack))
        return
    for queue, tail in admission.tails.items():
        if isinstance(tail.lack, Shortfall):
            admission.tails[queue] = tail._replace(lack=in_fact.lack(tail.lack))


def _said(wait: Waiting, lack: HeldInFact | Shortfall) -> Waiting:
    return replace(wait, lacks=lack)
