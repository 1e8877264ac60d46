"""The planner's bridge to fair sharing: one ordered queue of tasks in, per-queue admission out,
and the queues' status document (`_queues.status.yaml`). Pure, like the planner."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.core.admission.policies import Candidate, Claim, Policy, WalkTail
from reconciler.core.admission.waits import QueueFull, Waiting
from reconciler.core.queues import fairshare, usage
from reconciler.core.queues.shareresult import HeldRoom, OwnTest
from specs.cluster import Capacity
from specs.queues.config import DEFAULT_QUEUE, FairSharing, QueueConfig
from specs.task.models import Phase, Reason
from specs.task.quantity import format_memory, parse_memory


@dataclass
class QueueAdmission:
    start: list[str] = field(default_factory=list)
    waiting: dict[str, Waiting] = field(default_factory=dict)
    queue_of: dict[str, str] = field(default_factory=dict)  # every candidate's queue
    states: dict[str, fairshare.QueueState] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    oversubscribed: str | None = None
    limits: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)  # run, queue
    tails: dict[str, WalkTail] = field(default_factory=dict)  # FairAdmission.tails
    until: float = math.inf  # FairAdmission.until
    short: set[str] = field(default_factory=set)  # FairAdmission.short
    unread: dict[str, list[OwnTest]] = field(default_factory=dict)  # FairAdmission.unread
    held: HeldRoom | None = None  # FairAdmission.held

    def summary(self) -> QueueSummary:
        return QueueSummary(self.states, self.weights, self.limits, self.oversubscribed)


@dataclass(frozen=True)
class QueueSummary:
    """What a pass tells of its queues beyond the core (the queue status file, metrics, the
    simulator): per queue only, so its size follows the queues, not the waiting tasks (each
    task's wait is in its own status)."""

    states: Mapping[str, fairshare.QueueState] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)
    limits: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict)
    oversubscribed: str | None = None


def admit_by_queue(
    config: QueueConfig,
    capacity: Capacity,
    free: Capacity,
    queue: Sequence[Candidate],
    in_use: Mapping[str, Capacity],
    claims: Sequence[Claim],
    now: float,
    slots: int,
    policy: Policy,
    reservation: str = fairshare.STRICT_RESERVATION,
    first: frozenset[str] = frozenset(),
    past: usage.QueueUsage | None = None,
    bound: int | None = None,
    cut: Collection[str] = (),
) -> QueueAdmission:
    """`queue` in global order (priority, queuedAt, name); `in_use`: what each task with a live
    job holds, by task name. Each queue keeps that order and runs `policy` within itself.
    `past`: each queue's decayed usage (resource-seconds, core/queues/usage.py), counted in its
    share unless `fairSharing.mode` is CurrentUsage; a queue it leaves out has used nothing.
    `bound`: each queue's walk tests at most this many tasks past its first that cannot
    start (backfill_candidates; fairshare.admit). `cut`: the queues of which `queue` holds
    only the front (QueueDemand.cut)."""
    quotas = fairshare.resolve(config, capacity)
    names = [q.name for q in quotas.queues]
    held = {name: Capacity() for name in names}
    running = dict.fromkeys(names, 0)
    for task, request in in_use.items():
        owner = config.queue_of(task)
        held[owner] = held[owner] + request
        running[owner] += 1
    sharing = config.spec.fair_sharing
    means: dict[str, Capacity | None] = dict.fromkeys(names)
    if past is not None and sharing.decays:
        since = usage.since_of(past)
        tracked = None if since is None else now - since
        for name in names:
            means[name] = usage.mean_rate(
                past.get(name, Capacity()), sharing.usage_half_life, tracked
            )
    members: dict[str, list[Candidate]] = {name: [] for name in names}
    queue_of: dict[str, str] = {}
    for candidate in queue:
        owner = config.queue_of(candidate.name)
        queue_of[candidate.name] = owner
        members[owner].append(candidate)
    own: dict[str, list[Claim]] = {name: [] for name in names}
    for claim in claims:
        if claim.task:
            own[config.queue_of(claim.task)].append(claim)
    demands = [
        fairshare.QueueDemand(
            quota,
            held[quota.name],
            members[quota.name],
            policy,
            own[quota.name],
            means[quota.name],
            running[quota.name],
            quota.name in cut,
        )
        for quota in quotas.queues
    ]
    # Each task's place in the cluster's order (priority, queuedAt, name): among queues of
    # equal share, the one whose front comes first goes first, not the first by name.
    order = {candidate.name: place for place, candidate in enumerate(queue)}
    result = fairshare.admit(
        capacity, free, demands, claims, now, slots, reservation, first, order, bound
    )
    return QueueAdmission(
        start=result.start,
        waiting=result.waiting,
        queue_of=queue_of,
        states=result.queues,
        weights={q.name: q.weight for q in quotas.queues},
        limits={q.name: (q.max_running, q.max_queued) for q in quotas.queues},
        oversubscribed=quotas.oversubscribed,
        tails=result.tails,
        until=result.until,
        short=result.short,
        unread=result.unread,
        held=result.held,
    )


def queue_full(config: QueueConfig, arrivals: Sequence[tuple[float, str]]) -> dict[str, Waiting]:
    """The queued tasks beyond their queue's maxQueued, by arrival (queuedAt, then name): the
    first maxQueued to arrive count, the later ones wait as QueueFull and are left out of
    admission, so a newcomer never pushes out a task that was already let in, whatever its
    priority."""
    limits = {q.name: q.max_queued for q in config.spec.queues}
    limits[DEFAULT_QUEUE] = config.spec.default.max_queued
    if all(limit is None for limit in limits.values()):
        return {}
    seen: dict[str, int] = {}
    full: dict[str, Waiting] = {}
    for _, name in sorted(arrivals):
        owner = config.queue_of(name)
        chain = [owner]  # its queue, then the queues that one lies in (nested queues)
        while (parent := config.parent_of(chain[-1])) is not None:
            chain.append(parent)
        bounded = [(q, limit) for q in chain if (limit := limits.get(q)) is not None]
        over = next(((q, limit) for q, limit in bounded if seen.get(q, 0) >= limit), None)
        if over is not None:
            full[name] = Waiting(QueueFull(*over), queue=owner)
            continue
        for q, _ in bounded:
            seen[q] = seen.get(q, 0) + 1
    return full


# --- _queues.status.yaml ------------------------------------------------------------------


def _amounts(value: Capacity) -> dict[str, Any]:
    return {
        "cpu": round(value.cpu, 6),
        "gpu": round(value.gpu, 6),
        "memory": format_memory(round(value.memory)),
    }


def _seconds(value: Capacity) -> dict[str, float]:
    """Resource-seconds, kept exact enough to read back (no memory units: byte-seconds)."""
    return {"cpu": round(value.cpu, 3), "gpu": round(value.gpu, 3), "memory": round(value.memory)}


def restore_usage(
    document: Mapping[str, Any] | None,
) -> tuple[usage.Tracked, dict[str, Capacity], float | None]:
    """From a `_queues.status.yaml` written earlier: (decayed usage and since when it has been
    tracked, what each queue held, and when), so a restart integrates the time it was down at
    the rates it last saw. Anything malformed reads as nothing remembered, never as an error."""
    past = usage.Tracked()
    held: dict[str, Capacity] = {}
    body = document.get("status") if isinstance(document, Mapping) else None
    if not isinstance(body, Mapping):
        return past, held, None
    when = _instant(body.get("usageAt"))
    past.since = _instant(body.get("usageSince"))
    for entry in body.get("queues") or ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        decayed = _capacity(entry.get("decayedUsage"))
        if decayed is not None:
            past[entry["name"]] = decayed
        now = _capacity(entry.get("usage"))
        if now is not None:
            held[entry["name"]] = now
    return past, held, when


def _instant(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _capacity(value: object) -> Capacity | None:
    if not isinstance(value, Mapping):
        return None
    try:
        memory = value.get("memory", 0)
        memory_bytes = float(parse_memory(memory)) if isinstance(memory, str) else float(memory)
        amounts = (float(value.get("cpu", 0)), float(value.get("gpu", 0)), memory_bytes)
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(a) and a >= 0 for a in amounts):
        return None
    return Capacity(*amounts)


@dataclass(frozen=True)
class ConfigState:
    """Which configuration is in force, and whether the file on disk is good."""

    file: str
    valid: bool
    error: str | None = None  # the file's latest problem; the last good config stays in force
    in_force: bool = True  # False: no good config was ever read, so there are no queues


def status_document(
    config: ConfigState,
    states: Mapping[str, fairshare.QueueState],
    weights: Mapping[str, float],
    counts: Mapping[str, tuple[int, int]],
    oversubscribed: str | None,
    past: usage.QueueUsage | None = None,
    past_at: float | None = None,
    sharing: FairSharing | None = None,
    limits: Mapping[str, tuple[int | None, int | None]] | None = None,
    policies: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The queues' status: one entry per queue, in config order. `counts`: (pending, admitted)
    by queue, where admitted means Starting or Running. `past`: each queue's decayed usage at
    `past_at` (unix seconds), written as `decayedUsage` (CPU-, GPU- and byte-seconds) so that
    serve reads it back when it starts again (`restore_usage`). Nested queues: each sub-queue
    follows its parent, names it (`parent`), and a parent counts its sub-queues' tasks too.
    `policies`: what each queue may do once bounded by its parent (`effective`,
    specs.queues.bounds.effective_policy)."""
    queues = []
    totals = _rolled_up(states, counts)
    for name in _tree_order(states):
        state = states[name]
        pending, admitted = totals.get(name, (0, 0))
        entry: dict[str, Any] = {
            "name": name,
            "nominalQuota": _amounts(state.nominal),
            "usage": _amounts(state.usage),
            "borrowed": _amounts(state.borrowed),
            "lent": _amounts(state.lent),
            "weight": weights.get(name, 1.0),
            "weightedShare": round(state.share, 4),
            "pending": pending,
            "admitted": admitted,
        }
        if state.parent is not None:
            entry["parent"] = state.parent
        if past is not None and name in past:
            entry["decayedUsage"] = _seconds(past[name])
        most_running, most_queued = (limits or {}).get(name, (None, None))
        if most_running is not None:
            entry["maxRunning"] = most_running
        if most_queued is not None:
            entry["maxQueued"] = most_queued  # the API refuses a new task beyond it (429)
        policy = (policies or {}).get(name)
        if policy is not None:
            entry["effective"] = dict(policy)
        queues.append(entry)
    body: dict[str, Any] = {
        "config": {"file": config.file, "valid": config.valid, "inForce": config.in_force},
        "queues": queues,
    }
    if sharing is not None:
        body["fairSharing"] = {"mode": sharing.mode, "usageHalfLife": sharing.usage_half_life}
    if past is not None and past_at is not None:
        body["usageAt"] = round(past_at, 3)
        since = usage.since_of(past)
        if since is not None:  # when tracking began: the bias-corrected mean needs it
            body["usageSince"] = round(since, 3)
    if config.error:
        body["config"]["error"] = config.error
    if oversubscribed:
        body["warning"] = oversubscribed
    return {"apiVersion": "rayqueue/v1", "kind": "QueueStatus", "status": body}


def _tree_order(states: Mapping[str, fairshare.QueueState]) -> list[str]:
    """Top queues in their order, each followed by its sub-queues (depth first)."""
    children: dict[str | None, list[str]] = {}
    for name, state in states.items():
        parent = state.parent if state.parent in states else None
        children.setdefault(parent, []).append(name)
    order: list[str] = []

    def visit(parent: str | None) -> None:
        for name in children.get(parent, ()):
            order.append(name)
            visit(name)

    visit(None)
    return order


def _rolled_up(
    states: Mapping[str, fairshare.QueueState], counts: Mapping[str, tuple[int, int]]
) -> dict[str, tuple[int, int]]:
    """(pending, admitted) per queue, each queue's including its sub-queues'."""
    totals: dict[str, tuple[int, int]] = {}
    for name, (pending, admitted) in counts.items():
        owner: str | None = name
        seen: set[str] = set()
        while owner is not None and owner not in seen:
            seen.add(owner)
            before = totals.get(owner, (0, 0))
            totals[owner] = (before[0] + pending, before[1] + admitted)
            state = states.get(owner)
            owner = state.parent if state is not None else None
    return totals


def counts_by_queue(
    phases: Mapping[str, tuple[str | None, Phase, str | None]],
) -> dict[str, tuple[int, int]]:
    """(pending, admitted) per queue from each task's (queue, phase, reason); a task beyond
    its queue's maxQueued (QueueFull) is not counted."""
    counts: dict[str, tuple[int, int]] = {}
    for queue, phase, reason in phases.values():
        if queue is None:
            continue
        pending, admitted = counts.get(queue, (0, 0))
        if phase is Phase.QUEUED and reason != Reason.QUEUE_FULL:
            pending += 1
        elif phase.active:
            admitted += 1
        counts[queue] = (pending, admitted)
    return counts
