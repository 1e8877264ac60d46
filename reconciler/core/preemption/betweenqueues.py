"""Fair-share preemption between sibling queues (`fairSharing.preemptionStrategies:
[LessThanOrEqualToFinalShare]`, as Kueue's): which runs of other queues a waiting front may stop
because its queue's weighted share is below theirs. Pure.

Only in pure sharing: the preemptor's queue and the victims' have no nominal quota (what they
hold is all borrowed, so the weighted share is the whole story; with quotas, reclaim is the
rule) and are top queues, not divided (nested queues are left out). The share is the one fair
share orders by (`quotas.dominant_share`, with the decayed past use when counted).

- **Whom.** Running runs of a sibling queue whose share is above the preemptor's queue's,
  no wider than the preemptor in any resource (a 1-CPU front never stops a 200-CPU run: the
  rest of what it frees would go to others, and its work is lost), not exempt by their own
  queue's rules (`preemptible: false`, `minRuntimeSeconds`, `maxPerTask`), whatever their
  priority: lowest priority first, then the newest, then the name.
- **The final-share rule.** A run is taken only if, after it and every other victim of its
  queue are stopped and the preemptor runs, the preemptor's share is at most the victim
  queue's: `share(p, usage_p + request) <= share(v, usage_v - victims)`. So right after, the
  victim queue's share is not below the preemptor's, and it cannot preempt back (a queue
  preempts only a queue of strictly higher share).
- **How many.** Taken in order until the preemptor fits, then trimmed, costliest (last)
  first, to a minimal set: dropping a victim only raises its queue's final share, so the rule
  still holds for the rest. Nothing if even every candidate would not do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from reconciler.core.preemption.victims import Preemptor, Rules, Running, Victim, exempt
from reconciler.core.queues.quotas import EPS, RESOURCES, dominant_share, of
from reconciler.core.queues.shareresult import QueueState
from specs.cluster import Capacity

_MARGIN = 1e-9
"""Shares computed from sums in another order differ by rounding: "below" means by more."""


def share_of(state: QueueState, usage: Capacity) -> float:
    """The queue's weighted share, were it to hold `usage`, with today's use in full: with it
    at the order's small weight a take would barely move either share, and the rule would
    keep taking."""
    return dominant_share(usage, state.nominal, state.lend, state.weight, state.past, 1.0).weighted


def order_share_of(state: QueueState, usage: Capacity) -> float:
    """The share fair sharing orders starts by (today's use at `CURRENT_USE_WEIGHT`)."""
    return dominant_share(usage, state.nominal, state.lend, state.weight, state.past).weighted


def pure_sharing(states: Mapping[str, QueueState], name: str) -> bool:
    """A queue with no nominal quota of anything: all it holds is borrowed."""
    state = states.get(name)
    return state is not None and all(of(state.nominal, r) <= EPS for r in RESOURCES)


def divided(states: Mapping[str, QueueState], name: str) -> bool:
    return any(s.parent == name for s in states.values())


def chain(states: Mapping[str, QueueState], name: str) -> list[str]:
    """The queue, then each queue it lies in, innermost first (as far as `states` knows)."""
    out = [name]
    while (parent := states[out[-1]].parent if out[-1] in states else None) is not None:
        if parent in out or parent not in states:
            break
        out.append(parent)
    return [q for q in out if q in states]


def takes_part(states: Mapping[str, QueueState], name: str) -> bool:
    """A queue whose front may preempt by share, and whose runs may be taken: not divided (a
    divided queue's own tasks never preempt, nor are taken), and in pure sharing at some level
    it lies in (itself or a queue it lies in has no nominal quota). Flat: a queue with no
    nominal quota."""
    if name not in states or divided(states, name):
        return False
    return any(pure_sharing(states, q) for q in chain(states, name))


def sides(states: Mapping[str, QueueState], mine: list[str], other: str) -> tuple[str, str] | None:
    """Where the preemptor's branch (`mine`, its chain) and `other`'s meet: the two queues,
    one on each path, that are children of the same node (or both top queues). None when one
    lies in the other."""
    theirs = chain(states, other)
    met = next((q for q in theirs if q in mine), None)
    if met is None:
        return (mine[-1], theirs[-1]) if theirs else None
    if met in (mine[0], theirs[0]):
        return None
    return mine[mine.index(met) - 1], theirs[theirs.index(met) - 1]


def least_served_below_top(
    states: Mapping[str, QueueState], name: str, asking: Iterable[str]
) -> bool:
    """Nested queues: whether the queue is, at each level below its top queue, the least
    served (by weighted share) of its siblings that hold a front asking to preempt, as fair
    share's admission would pick. Only then may its front preempt by share: else a
    better-served user, its team below another, would take that team's runs for itself while
    its sibling waits. A top queue: always."""
    branches = [chain(states, other) for other in asking]
    path = chain(states, name)
    for queue in path[:-1]:
        parent = states[queue].parent
        mine = states[queue].share
        for branch in branches:
            rival = next((q for q in branch if states[q].parent == parent), None)
            if rival is not None and rival != queue and states[rival].share < mine - _MARGIN:
                return False
    return True


def _below_nominal(state: QueueState, left: Capacity, run: Capacity) -> bool:
    """Whether holding `left`, the queue is under its nominal quota in a resource `run` holds."""
    return any(of(run, r) > 0 and of(left, r) < of(state.nominal, r) - EPS for r in RESOURCES)


def _no_wider(run: Capacity, request: Capacity) -> bool:
    return all(of(run, r) <= of(request, r) + EPS for r in RESOURCES)


def _above(
    states: Mapping[str, QueueState], usage: Mapping[str, Capacity], own: str, side: str
) -> bool:
    """Only a branch above the preemptor's in share loses runs to it: by the rule's share
    (today's use in full), and by the order's too, or the take goes to a queue the order
    counts as better served (a lower past use)."""
    return all(
        share(states[side], usage[side]) > share(states[own], usage[own]) + _MARGIN
        for share in (share_of, order_share_of)
    )


def choose(
    preemptor: Preemptor,
    queue: str,
    pool: Iterable[tuple[str, Running]],
    rules: Mapping[str, Rules],
    states: Mapping[str, QueueState],
    usage: Mapping[str, Capacity],
    fits: Callable[[Capacity], bool],
    now: float,
) -> tuple[Victim, ...]:
    """A minimal set of other queues' runs after which the preemptor `fits` (given what they
    free), each satisfying the final-share rule where its branch and the preemptor's meet;
    empty when none is needed or none would do. `usage`: what each queue holds (a divided
    queue: its sub-queues' sum), without runs already stopping."""
    if not takes_part(states, queue) or fits(Capacity()):
        return ()
    mine = chain(states, queue)
    request = preemptor.request
    # (victim's queue, run, the preemptor's side, the victim's side, the victim's path below
    # where they meet)
    candidates: list[tuple[str, Running, str, str, list[str]]] = []
    above: dict[tuple[str, str], bool] = {}  # by (own, side): the same for all their runs
    for where, run in pool:
        if where == queue or run.name == preemptor.name or not takes_part(states, where):
            continue
        met = sides(states, mine, where)
        if met is None:
            continue
        own, side = met
        if not (pure_sharing(states, own) and pure_sharing(states, side)):
            continue  # judged by share only in pure sharing where they meet (else: reclaim)
        if exempt(run, now, rules.get(where, Rules())):
            continue
        if not _no_wider(run.request, request):
            continue  # what it frees beyond the front's need would go to others: no trade
        if (own, side) not in above:
            above[own, side] = _above(states, usage, own, side)
        if not above[own, side]:
            continue
        path = chain(states, where)
        candidates.append((where, run, own, side, path[: path.index(side) + 1]))
    # Lowest priority first; in a tree, then the runs of the victim's branch's most-served
    # sub-queue, down to the leaf (Kueue: the target of highest share); then the newest, then
    # the name.
    candidates.sort(
        key=lambda item: (
            item[1].priority,
            tuple(-share_of(states[q], usage[q]) for q in reversed(item[4][:-1])),
            -item[1].started,
            item[1].name,
        )
    )
    chosen: list[tuple[str, Running, str, str, list[str]]] = []
    taken: dict[str, Capacity] = {}  # by queue on the victims' paths
    freed = Capacity()
    for item in candidates:
        _, run, own, side, path = item
        if any(
            _below_nominal(
                states[q], usage[q] - taken.get(q, Capacity()) - run.request, run.request
            )
            for q in path
        ):
            continue  # a queue is never taken below its nominal quota by share
        after = share_of(states[own], usage[own] + request)
        left = usage[side] - taken.get(side, Capacity()) - run.request
        if after > share_of(states[side], left):
            continue  # its branch would end below the preemptor's: it could preempt back
        for q in path:
            taken[q] = taken.get(q, Capacity()) + run.request
        chosen.append(item)
        freed = freed + run.request
        if fits(freed):
            break
    else:
        return ()
    # Trimmed, costliest (last) first: dropping a victim only raises what its queues hold, so
    # the rules still hold for the rest.
    for item in reversed(list(chosen)):
        if fits(freed - item[1].request):
            chosen.remove(item)
            freed = freed - item[1].request
            for q in item[4]:
                taken[q] = taken[q] - item[1].request
    return tuple(
        Victim(
            run,
            where,
            reclaim=False,
            shares=(
                share_of(states[own], usage[own] + request),
                share_of(states[side], usage[side] - taken[side]),
            ),
            judged=None if (own, side) == (queue, where) else (own, side),
        )
        for where, run, own, side, _ in chosen
    )
