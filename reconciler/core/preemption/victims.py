"""Which running tasks to stop so that a more urgent queued task can start: the victim choice.

Pure: no I/O, no clock (the caller gives `now`). The planner decides *who* may preempt (only
the front the policy would admit next, and only while none of its earlier victims is still
stopping) and carries the decision out; this module only answers "which victims, if any".

The rules, chosen against the complaints about Kueue's preemption:
- a preemptor below its queue's `min_preemptor_priority` takes nothing (it waits instead);
- a victim is running, preemptible, of lower priority, and has run at least the minimum
  runtime (a fresh run is never thrown away at once); a task preempted `max_per_task` times
  already (3 unless its queue says otherwise) is spared from then on, so no task can be
  starved by being restarted for ever;
- a victim is never chosen by a task it could itself preempt back, so two tasks cannot take
  turns stopping each other;
- victims are tried cheapest first: lowest priority, then the least lost work (`lost_work`:
  the seconds of work a stop throws away times the run's size, its dominant share of the
  cluster; a resumable run loses at most its grace period), then the name, so the choice is
  deterministic and predictable;
- the greedy choice is then trimmed to a minimal set: every victim the preemptor fits without
  is dropped, the costliest first;
- if the preemptor would not fit even with every candidate gone, nobody is preempted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from specs.cluster import Capacity

NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
ANY = "Any"
MODES = (NEVER, LOWER_PRIORITY)
"""Kueue's withinClusterQueue values that make sense for one queue, and the --preemption flag's
choices; the queue configuration's `withinQueue` takes the same."""

_EPS = 1e-9
_RESOURCES = ("cpu", "gpu", "memory")


@dataclass(frozen=True)
class Rules:
    """How a queue lets its tasks preempt, and protects its runs from being preempted."""

    within_queue: str = NEVER
    min_runtime_seconds: float = 0.0
    max_per_task: int = 3  # a task preempted this often is never a victim again; 0: no limit
    reclaim_within_cohort: str = NEVER  # below its nominal quota: take lent quota back
    min_preemptor_priority: int = 0  # a task of lower priority never preempts (nor reclaims)


@dataclass(frozen=True)
class Preemptor:
    """The queued task that wants to start."""

    name: str
    priority: int
    request: Capacity


@dataclass(frozen=True)
class Running:
    """A run in Ray that might be stopped for it."""

    name: str
    priority: int
    request: Capacity
    started: float  # when Ray started running it, Unix seconds
    preemptible: bool = True
    preemptions: int = 0  # how often the task was preempted before this run
    resumable: bool = False  # saves its state on SIGTERM and resumes on its next run
    size: float = 1.0  # its dominant share of the cluster's ceiling (`dominant_share`)
    grace_seconds: float = 0.0  # SIGTERM to SIGKILL, what its job gets when stopped


def may_ask(rules: Rules, priority: int) -> bool:
    """Whether a task of `priority` may preempt at all, within its queue or by reclaim: below
    the queue's threshold it waits as if preemption were off (Kubernetes' `preemptionPolicy:
    Never`)."""
    return priority >= rules.min_preemptor_priority


def may_preempt(rules: Rules, attacker: int, target: int) -> bool:
    """Whether a task of priority `attacker` may stop one of priority `target`."""
    return rules.within_queue == LOWER_PRIORITY and target < attacker


def may_reclaim(rules: Rules, attacker: int, target: int) -> bool:
    """Whether a task of priority `attacker` may take lent quota back from a run of `target`."""
    mode = rules.reclaim_within_cohort
    return mode == ANY or (mode == LOWER_PRIORITY and target < attacker)


def exempt(run: Running, now: float, rules: Rules) -> bool:
    """Never a victim, by its own queue's rules: opted out, too young, or preempted enough."""
    return (
        not run.preemptible
        or now - run.started < rules.min_runtime_seconds
        or bool(rules.max_per_task and run.preemptions >= rules.max_per_task)
    )


def dominant_share(request: Capacity, total: Capacity) -> float:
    """A run's size: the largest share of the cluster it declares of any resource (CPU, GPU,
    memory), as in DRF. Resources the cluster has none of are left out; 0 if it has none.
    `total` is the cluster's ceiling on an autoscaling cluster (`scaling.ceiling_of`), the
    same whole that quotas are shares of."""
    return max(
        (getattr(request, r) / getattr(total, r) for r in _RESOURCES if getattr(total, r) > 0),
        default=0.0,
    )


def lost_work(run: Running, now: float) -> float:
    """What stopping the run now throws away: the seconds of work lost times its size. A
    plain run loses all it has run; a resumable one saves its state when it gets SIGTERM, so it
    loses only the time it takes to stop, at most its grace period."""
    elapsed = max(now - run.started, 0.0)
    seconds = min(elapsed, run.grace_seconds) if run.resumable else elapsed
    return seconds * run.size


def exempt_from_reclaim(run: Running, rules: Rules) -> bool:
    """Never taken back from a borrowing queue: opted out, or preempted enough. Its age does
    not protect it: work above a queue's nominal quota is always reclaimable (as in Kueue),
    or minRuntimeSeconds would let a queue keep what it borrowed for as long as it likes."""
    return not run.preemptible or bool(rules.max_per_task and run.preemptions >= rules.max_per_task)


def still_needed(request: Capacity, freeing: Capacity) -> Capacity:
    """What a preemptor still needs of today's free resources beyond what its stopping victims
    will free: others may not take it meanwhile, or it would find no room when they are gone
    and preempt again."""
    return Capacity(
        max(request.cpu - freeing.cpu, 0.0),
        max(request.gpu - freeing.gpu, 0.0),
        max(request.memory - freeing.memory, 0.0),
    )


# --- across team queues ----------------------------------------------------------------------


@dataclass(frozen=True)
class QueueLoad:
    """A queue as reclaim sees it: its nominal quota, and what its runs hold (left out: runs
    already stopping, which are somebody's victims and free their resources soon)."""

    nominal: Capacity
    usage: Capacity


@dataclass(frozen=True)
class Victim:
    run: Running
    queue: str
    reclaim: bool  # lent quota taken back from a borrowing queue; else within the own queue
    # Taken by fair sharing (core/preemption/betweenqueues.py): the preemptor's queue's share with
    # it
    # running, and the victim's queue's without its victims; None: not by share.
    shares: tuple[float, float] | None = None
    # Nested queues: the two queues those shares are of, where the preemptor's branch and the
    # victim's meet (preemptor's side, victim's side); None: the two queues themselves.
    judged: tuple[str, str] | None = None


Fits = Callable[[Capacity, Capacity], bool]
"""(freed in all, freed within the preemptor's own queue) -> whether the preemptor fits."""


def _borrows(request: Capacity, run: Capacity, load: QueueLoad, taken: Capacity) -> bool:
    """Whether the queue, without `taken`, still holds more than its nominal quota of some
    resource the preemptor needs and the run holds: only lent quota is taken back."""
    left = load.usage - taken
    return any(
        getattr(request, r) > 0
        and getattr(run, r) > 0
        and getattr(left, r) > getattr(load.nominal, r) + _EPS
        for r in _RESOURCES
    )


def choose_in_cohort(
    preemptor: Preemptor,
    queue: str,
    running: Iterable[tuple[str, Running]],
    rules: Mapping[str, Rules],
    loads: Mapping[str, QueueLoad],
    fits: Fits,
    now: float,
    *,
    reclaim: bool,
) -> tuple[Victim, ...]:
    """A minimal set of runs, from the preemptor's own queue (its `withinQueue`) and, when
    `reclaim` (the preemptor fits within its queue's nominal quota), from other queues that
    borrow (its `reclaimWithinCohort`), after which `fits`. Each run is exempt by its own
    queue's rules. Empty when it fits already or when every candidate together would not do.

    No ping-pong: within a queue, LowerPriority never lets a victim preempt back; across
    queues, a reclaim victim's queue borrows, and the preemptor's queue stays within its
    nominal quota once it runs, so the victim's queue can never reclaim from it in turn.

    Order: reclaim victims first (the lender takes back its own quota before it sacrifices
    its own work, as in Kueue), then within each, lowest priority, least lost work, name.
    """
    own = rules.get(queue, Rules())
    if not may_ask(own, preemptor.priority) or fits(Capacity(), Capacity()):
        return ()
    pool: list[Victim] = []
    for where, run in running:
        if run.name == preemptor.name:
            continue
        if where == queue:
            if exempt(run, now, own):
                continue
            if may_preempt(own, preemptor.priority, run.priority) and not may_preempt(
                own, run.priority, preemptor.priority
            ):
                pool.append(Victim(run, where, reclaim=False))
        elif (
            reclaim
            and where in loads
            and not exempt_from_reclaim(run, rules.get(where, own))
            and may_reclaim(own, preemptor.priority, run.priority)
        ):
            pool.append(Victim(run, where, reclaim=True))
    pool.sort(key=lambda v: (not v.reclaim, v.run.priority, lost_work(v.run, now), v.run.name))
    chosen: list[Victim] = []
    taken: dict[str, Capacity] = {}
    freed, freed_own = Capacity(), Capacity()
    for victim in pool:
        request = victim.run.request
        if victim.reclaim:
            before = taken.get(victim.queue, Capacity())
            if not _borrows(preemptor.request, request, loads[victim.queue], before):
                continue  # its queue no longer borrows what the preemptor needs
            taken[victim.queue] = before + request
        chosen.append(victim)
        freed = freed + request
        if not victim.reclaim:
            freed_own = freed_own + request
        if fits(freed, freed_own):
            break
    else:
        return ()
    # Trim, costliest first. Dropping a victim only raises its queue's usage, so every kept
    # reclaim victim's queue still borrows; and `fits` grows with what is freed, so what is
    # kept is minimal: without any one of them the preemptor would not fit.
    for victim in reversed(list(chosen)):
        own_part = Capacity() if victim.reclaim else victim.run.request
        if fits(freed - victim.run.request, freed_own - own_part):
            chosen.remove(victim)
            freed = freed - victim.run.request
            freed_own = freed_own - own_part
    return tuple(chosen)
