"""Which running tasks to stop so that a more urgent queued task can start: the victim choice.

Pure: no I/O, no clock (the caller passes `now`). The planner decides *who* may preempt (only
the head the policy would admit next, and only while none of its earlier victims is still
stopping) and carries the decision out; this module only answers "which victims, if any".

The rules, chosen against the complaints about Kueue's preemption:
- a victim is running, preemptible, of lower priority, and has run at least the minimum
  runtime (a fresh run is never thrown away at once); a task preempted `max_per_task` times
  already is spared from then on, so no task can be starved by being restarted for ever;
- a victim is never chosen by a task it could itself preempt back, so two tasks cannot take
  turns stopping each other;
- victims are tried cheapest first: lowest priority, then the shortest elapsed run (the work a
  restart throws away), then the name, so the choice is deterministic and predictable;
- the greedy choice is then trimmed to a minimal set: every victim the preemptor fits without
  is dropped, the costliest first;
- if the preemptor would not fit even with every candidate gone, nobody is preempted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from specs.cluster import Capacity

NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
MODES = (NEVER, LOWER_PRIORITY)
"""Kueue's withinClusterQueue values that make sense for one queue, and the --preemption flag's
choices; the queue configuration's `withinQueue` takes the same."""


@dataclass(frozen=True)
class Rules:
    """How a queue lets its tasks preempt each other."""

    within_queue: str = NEVER
    min_runtime_seconds: float = 0.0
    max_per_task: int = 0  # a task preempted this often is never a victim again; 0: no limit


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


def may_preempt(rules: Rules, attacker: int, target: int) -> bool:
    """Whether a task of priority `attacker` may stop one of priority `target`."""
    return rules.within_queue == LOWER_PRIORITY and target < attacker


def candidates(
    preemptor: Preemptor,
    running: Iterable[Running],
    now: float,
    rules: Rules,
) -> list[Running]:
    """The runs `preemptor` may stop, cheapest first."""
    eligible = [
        run
        for run in running
        if run.preemptible
        and run.name != preemptor.name
        and now - run.started >= rules.min_runtime_seconds
        and not (rules.max_per_task and run.preemptions >= rules.max_per_task)
        and may_preempt(rules, preemptor.priority, run.priority)
        # No ping-pong: a run that could preempt the preemptor back is never its victim.
        and not may_preempt(rules, run.priority, preemptor.priority)
    ]
    return sorted(eligible, key=lambda run: (run.priority, now - run.started, run.name))


def choose_victims(
    preemptor: Preemptor,
    free: Capacity,
    running: Sequence[Running],
    now: float,
    rules: Rules,
) -> tuple[Running, ...]:
    """A minimal set of runs to stop so that `preemptor` fits into `free` plus what they hold.

    Empty when it fits already, when preemption is off, or when even every candidate together
    would not make room: stopping work that cannot help is pure waste.
    """
    if rules.within_queue == NEVER or preemptor.request.fits_in(free):
        return ()
    chosen: list[Running] = []
    available = free
    for run in candidates(preemptor, running, now, rules):
        chosen.append(run)
        available = available + run.request
        if preemptor.request.fits_in(available):
            break
    else:
        return ()
    # Trim, costliest first: a victim added only because the cheaper ones came first, or one
    # that frees a resource the preemptor does not need, is spared.
    for run in reversed(list(chosen)):
        if preemptor.request.fits_in(available - run.request):
            chosen.remove(run)
            available = available - run.request
    return tuple(chosen)


def held_back(request: Capacity, freeing: Capacity) -> Capacity:
    """What a preemptor still needs of today's free resources beyond what its stopping victims
    will free: others may not take it meanwhile, or it would find no room when they are gone
    and preempt again."""
    return Capacity(
        max(request.cpu - freeing.cpu, 0.0),
        max(request.gpu - freeing.gpu, 0.0),
        max(request.memory - freeing.memory, 0.0),
    )
