"""Team queues as a tree: each queue's demand going into a pass, and the nodes fair share's
admission (`reconciler.core.queues.fairshare`) goes over. A divided queue holds its
sub-queues and a leaf of its own for the tasks directly in its folder; its usage and running
count are theirs summed. Pure, like the rest of the core."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reconciler.core.admission.policies import Candidate, Claim, Policy
from reconciler.core.queues.quotas import QueueQuota, min_of, pos
from specs.cluster import Capacity


@dataclass(frozen=True)
class QueueDemand:
    """One queue going into a pass: its quota, what it holds, and its waiting tasks in order."""

    quota: QueueQuota
    usage: Capacity
    candidates: Sequence[Candidate]
    policy: Policy
    claims: Sequence[Claim] = ()  # its own runs' claims: only their end frees its quota
    past: Capacity | None = None  # its decayed mean use (core/queues/usage.py); None: not counted
    running: int = 0  # its tasks Starting or Running, for maxRunning
    # More tasks follow `candidates` (the incremental planner gives each queue's front only):
    # an answer that would read past them is reported (FairAdmission.short), not trusted.
    cut: bool = False


@dataclass
class QueueNode:
    """One queue in a pass: what it holds, what still waits, and where it lies in the tree."""

    quota: QueueQuota
    usage: Capacity
    remaining: list[Candidate]
    policy: Policy
    claims: list[Claim] = field(default_factory=list)
    past: Capacity | None = None
    running: int = 0
    admitted: list[str] = field(default_factory=list)
    memo: tuple[object, list[str]] | None = None  # (inputs, the policy's starts) of last ask
    # Nested queues: a divided queue holds its sub-queues (and a leaf of its own for the tasks
    # directly in its folder, `own`); its usage, running count and admissions are theirs summed.
    parent: QueueNode | None = None
    children: list[QueueNode] = field(default_factory=list)
    own: bool = False
    cut: bool = False  # QueueDemand.cut

    @property
    def borrowed(self) -> Capacity:
        return pos(self.usage - self.quota.nominal)

    @property
    def at_limit(self) -> bool:
        """As many tasks Starting or Running as its (or an enclosing queue's) maxRunning
        allows: no pick, no hold."""
        return self.limiting() is not None

    def limiting(self) -> QueueNode | None:
        """The nearest queue, itself or one it lies in, at its maxRunning."""
        node: QueueNode | None = self
        while node is not None:
            limit = node.quota.max_running
            if limit is not None and node.running + len(node.admitted) >= limit:
                return node
            node = node.parent
        return None

    def guarded(self) -> Capacity:
        """What its waiting fronts within their nominal quotas are owed (never lent away)."""
        if self.children:
            total = Capacity()
            for child in self.children:
                total = total + child.guarded()
            return total
        if self.remaining:
            front = self.remaining[0].request
            if (self.usage + front).fits_in(self.quota.nominal):
                return front
        return Capacity()

    def idle(self) -> Capacity:
        """Unused nominal quota, without what its front needs if the front is guaranteed."""
        return pos(pos(self.quota.nominal - self.usage) - self.guarded())

    def leaves(self) -> list[QueueNode]:
        if not self.children:
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]

    def chain(self) -> list[QueueNode]:
        """Itself and every queue it lies in, innermost first."""
        nodes = [self]
        while nodes[-1].parent is not None:
            nodes.append(nodes[-1].parent)
        return nodes

    def lendable(self) -> Capacity:
        return min_of(self.quota.lending_limit, self.idle())


def build_tree(demands: Sequence[QueueDemand]) -> tuple[list[QueueNode], list[QueueNode]]:
    """The queues as a tree (top queues, in order) and its leaves. A queue whose quota names a
    parent is that parent's sub-queue; a divided queue's own tasks (directly in its folder) form
    a leaf of their own, holding what its sub-queues' nominal quotas leave of its own."""
    nodes = {
        d.quota.name: QueueNode(
            d.quota,
            d.usage,
            list(d.candidates),
            d.policy,
            list(d.claims),
            d.past,
            d.running,
            cut=d.cut,
        )
        for d in demands
    }
    top: list[QueueNode] = []
    for node in nodes.values():
        parent = nodes.get(node.quota.parent) if node.quota.parent is not None else None
        if parent is None:
            top.append(node)
        else:
            node.parent = parent
            parent.children.append(node)
    for node in reversed(parents_first(top)):  # sub-queues first: a parent sums what they hold
        if node.children:
            _divide(node)
    return top, [leaf for node in top for leaf in node.leaves()]


def _divide(node: QueueNode) -> None:
    """Move a divided queue's own tasks to a leaf, and sum its sub-queues into it."""
    children = list(node.children)
    carved = Capacity()
    for child in children:
        carved = carved + child.quota.nominal
    own_quota = QueueQuota(node.quota.name, pos(node.quota.nominal - carved))
    # Decayed usage is linear in what was held, so the queue's own tasks' past is the queue's
    # (recorded as the sum) less its sub-queues'.
    own_past = node.past
    if own_past is not None:
        for child in children:
            own_past = pos(own_past - _total_past(child))
    own = QueueNode(
        own_quota,
        node.usage,
        node.remaining,
        node.policy,
        node.claims,
        own_past,
        node.running,
        parent=node,
        own=True,
        cut=node.cut,
    )
    node.children = [own, *children]
    node.remaining, node.claims = [], []
    node.usage = _sum_usage(node)
    node.running = sum(_running(child) for child in node.children)


def _total_past(node: QueueNode) -> Capacity:
    return node.past if node.past is not None else Capacity()


def _sum_usage(node: QueueNode) -> Capacity:
    if not node.children:
        return node.usage
    total = Capacity()
    for child in node.children:
        total = total + _sum_usage(child)
    return total


def _running(node: QueueNode) -> int:
    if not node.children:
        return node.running
    return sum(_running(child) for child in node.children)


def parents_first(level: Sequence[QueueNode]) -> list[QueueNode]:
    """Every queue, parents before their sub-queues."""
    out: list[QueueNode] = []
    for node in level:
        out.append(node)
        out.extend(parents_first(node.children))
    return out
