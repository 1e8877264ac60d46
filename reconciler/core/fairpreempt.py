"""Fair-share preemption between sibling queues (`fairSharing.preemptionStrategies:
[LessThanOrEqualToFinalShare]`, as Kueue's): which runs of other queues a waiting head may stop
because its queue's weighted share is below theirs. Pure.

Only in pure sharing: the preemptor's queue and the victims' have no nominal quota (what they
hold is all borrowed, so the weighted share is the whole story; with quotas, reclaim is the
rule) and are top queues, not divided (nested queues are left out). The share is the one fair
share orders by (`quotas.dominant_share`, with the decayed past use when counted).

- **Whom.** Running runs of a sibling queue whose share is above the preemptor's queue's,
  no wider than the preemptor in any resource (a 1-CPU head never stops a 200-CPU run: the
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

from reconciler.core.fairhold import QueueState
from reconciler.core.quotas import EPS, RESOURCES, dominant_share, of
from reconciler.core.victims import Preemptor, Rules, Running, Victim, exempt
from specs.cluster import Capacity

_MARGIN = 1e-9
"""Shares computed from sums in another order differ by rounding: "below" means by more."""


def share_of(state: QueueState, usage: Capacity) -> float:
    """The queue's weighted share, were it to hold `usage`."""
    return dominant_share(usage, state.nominal, state.lend, state.weight, state.past).weighted


def pure_sharing(states: Mapping[str, QueueState], name: str) -> bool:
    """A top queue, not divided, with no nominal quota of anything."""
    state = states.get(name)
    if state is None or state.parent is not None:
        return False
    if any(s.parent == name for s in states.values()):
        return False
    return all(of(state.nominal, r) <= EPS for r in RESOURCES)


def _no_wider(run: Capacity, request: Capacity) -> bool:
    return all(of(run, r) <= of(request, r) + EPS for r in RESOURCES)


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
    free), each satisfying the final-share rule; empty when none is needed or none would do.
    `usage`: what each queue holds, without runs already stopping."""
    if not pure_sharing(states, queue) or fits(Capacity()):
        return ()
    mine = states[queue]
    before = share_of(mine, usage[queue])
    after = share_of(mine, usage[queue] + preemptor.request)
    candidates: list[tuple[str, Running]] = []
    for where, run in pool:
        if where == queue or run.name == preemptor.name or not pure_sharing(states, where):
            continue
        if exempt(run, now, rules.get(where, Rules())):
            continue
        if not _no_wider(run.request, preemptor.request):
            continue  # what it frees beyond the head's need would go to others: no trade
        if share_of(states[where], usage[where]) <= before + _MARGIN:
            continue  # only a queue above it in share loses runs to it
        candidates.append((where, run))
    candidates.sort(key=lambda item: (item[1].priority, -item[1].started, item[1].name))
    chosen: list[tuple[str, Running]] = []
    taken: dict[str, Capacity] = {}
    freed = Capacity()
    for where, run in candidates:
        left = usage[where] - taken.get(where, Capacity()) - run.request
        if after > share_of(states[where], left):
            continue  # its queue would end below the preemptor's: it could preempt back
        taken[where] = taken.get(where, Capacity()) + run.request
        chosen.append((where, run))
        freed = freed + run.request
        if fits(freed):
            break
    else:
        return ()
    for where, run in reversed(list(chosen)):
        if fits(freed - run.request):
            chosen.remove((where, run))
            freed = freed - run.request
            taken[where] = taken[where] - run.request
    return tuple(
        Victim(
            run,
            where,
            reclaim=False,
            shares=(after, share_of(states[where], usage[where] - taken[where])),
        )
        for where, run in chosen
    )
