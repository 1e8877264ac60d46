"""Team queues' quotas, resolved against the cluster (`resolve`), and the per-resource
arithmetic on Capacity that fair sharing and its messages use."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.core.resources import amount, unit
from specs.cluster import Capacity
from specs.queues.config import DEFAULT_QUEUE, UNLIMITED, QueueConfig

RESOURCES = ("cpu", "gpu", "memory")
NO_LIMIT = Capacity(UNLIMITED, UNLIMITED, UNLIMITED)
EPS = 1e-9


@dataclass(frozen=True)
class QueueQuota:
    """One queue's configuration, resolved against the cluster's capacity."""

    name: str
    nominal: Capacity
    borrowing_limit: Capacity = NO_LIMIT
    lending_limit: Capacity = NO_LIMIT
    weight: float = 1.0
    max_running: int | None = None  # tasks Starting or Running; None: no limit
    max_queued: int | None = None  # tasks Queued; None: no limit
    parent: str | None = None  # the queue it divides (nested queues); None: a top-level queue


@dataclass(frozen=True)
class Quotas:
    queues: tuple[QueueQuota, ...]
    oversubscribed: str | None = None  # why the listed quotas cannot all be honoured


def resolve(config: QueueConfig, capacity: Capacity) -> Quotas:
    """Listed queues as configured; `default` gets what the cluster has beyond them (>= 0)."""
    listed = tuple(
        QueueQuota(
            q.name,
            q.nominal_quota.capacity(),
            q.borrowing_limit.capacity(),
            q.lending_limit.capacity(),
            q.weight,
            q.max_running,
            q.max_queued,
            config.parent_of(q.name),
        )
        for q in config.spec.queues
    )
    total = Capacity()
    for q in listed:
        if q.parent is None:  # a sub-queue's quota is carved out of its parent's
            total = total + q.nominal
    rest = capacity - total
    default = config.spec.default
    default_quota = QueueQuota(
        DEFAULT_QUEUE,
        pos(rest),
        default.borrowing_limit.capacity(),
        default.lending_limit.capacity(),
        default.weight,
        default.max_running,
        default.max_queued,
    )
    over = [
        f"{amount(r, of(total, r))} {unit(r)} > {amount(r, of(capacity, r))}"
        for r in RESOURCES
        if of(rest, r) < -EPS
    ]
    warnings = []
    if over:
        warnings.append(
            "the listed nominal quotas add up to more than the cluster has ("
            + ", ".join(over)
            + "); they are honoured only as far as resources are free"
        )
    warnings.extend(_divided_beyond(listed))
    return Quotas((*listed, default_quota), "; ".join(warnings) or None)


def _divided_beyond(listed: tuple[QueueQuota, ...]) -> list[str]:
    """Each queue whose sub-queues' nominal quotas add up to more than its own: reported, not
    fatal; the parent's quota still caps them all."""
    children: dict[str, Capacity] = {}
    for q in listed:
        if q.parent is not None:
            children[q.parent] = children.get(q.parent, Capacity()) + q.nominal
    warnings = []
    for q in listed:
        total = children.get(q.name)
        if total is None:
            continue
        over = [
            f"{amount(r, of(total, r))} {unit(r)} > {amount(r, of(q.nominal, r))}"
            for r in RESOURCES
            if of(total, r) > of(q.nominal, r) + EPS
        ]
        if over:
            warnings.append(
                f'the sub-queues of "{q.name}" have nominal quotas adding up to more than its '
                f"own ({', '.join(over)}); together they get at most what {q.name} gets"
            )
    return warnings


# --- per-resource arithmetic on Capacity ---------------------------------------------------


def pos(a: Capacity) -> Capacity:
    # Spelled out (no helper taking `max`): fair admission calls these hundreds of times a pass.
    return Capacity(max(a.cpu, 0.0), max(a.gpu, 0.0), max(a.memory, 0.0))


def scaled(a: Capacity, k: float) -> Capacity:
    return Capacity(a.cpu * k, a.gpu * k, a.memory * k)


def min_of(a: Capacity, b: Capacity) -> Capacity:
    return Capacity(min(a.cpu, b.cpu), min(a.gpu, b.gpu), min(a.memory, b.memory))


def scale(a: Capacity, factor: Capacity) -> Capacity:
    return Capacity(a.cpu * factor.cpu, a.gpu * factor.gpu, a.memory * factor.memory)


def of(amounts: Capacity, resource: str) -> float:
    return float(getattr(amounts, resource))


def lendable(quotas: Iterable[QueueQuota]) -> Capacity:
    """What the queues can lend between them, per resource: each queue's nominal quota capped
    by its lendingLimit (Kueue's "lendable resources" of a cohort). A fixed amount of the
    configuration, not lowered by use, so shares stay comparable as work starts and ends."""
    total = Capacity()
    for quota in quotas:
        total = total + min_of(quota.nominal, quota.lending_limit)
    return total


@dataclass(frozen=True, order=True)
class Share:
    """A queue's weighted dominant share of what is borrowed; lower is served first."""

    weighted: float  # the share divided by the weight; inf: a weight-0 queue that borrows
    ratio: float = 0.0  # before the weight: orders weight-0 borrowers among themselves


NO_SHARE = Share(0.0)

CURRENT_USE_WEIGHT = 0.05
"""How much today's use counts beside the decayed mean use, in the fair-share order. The mean
is an integral of what was held; today's use beside it at full weight is a proportional term
that leaves a standing error of about one start (16 CPUs, two 8-CPU slots, weights 1:3: the
weight-3 queue settles at (12 - 2a) / 16, 0.624 at a = 1, 0.744 at 0.05; docs/scheduling.md,
"The share formula"). Small but not 0: within one pass the mean does not move, and without
it every start of the pass would go to the same queue. Kueue's entry penalty plays this part."""


def dominant_share(
    usage: Capacity,
    nominal: Capacity,
    lend: Capacity,
    weight: float,
    past: Capacity | None = None,
    current_weight: float = CURRENT_USE_WEIGHT,
) -> Share:
    """Max over resources of (`current_weight` x usage above nominal, plus the decayed past
    use above nominal) / what the queues can lend, divided by the weight. Without a past
    (decay off: `fairSharing.mode: CurrentUsage`) usage above nominal counts in full. Within
    its nominal quota, now and in the past, a queue's share is 0 whatever its weight; a
    resource nobody lends does not count; a weight-0 queue that borrows has an infinite share
    (it borrows last), never NaN.
    `past`: the queue's decayed mean use (`reconciler.core.queues.usage.mean_rate`), in
    resources."""
    borrowed = pos(usage - nominal)
    if past is not None:
        borrowed = scaled(borrowed, current_weight) + pos(past - nominal)
    if not any(of(borrowed, r) > EPS for r in RESOURCES):
        return NO_SHARE
    ratio = max([0.0, *(of(borrowed, r) / of(lend, r) for r in RESOURCES if of(lend, r) > EPS)])
    if weight <= 0:
        return Share(math.inf, ratio)
    return Share(ratio / weight, ratio)
