"""The simulated cluster's nodes and a model of Ray's autoscaler.

A static head (what it offers to jobs: nothing by default, the head is protected) and node types
with max counts. Like Ray's autoscaler with `request_resources`, `scale` reads a target (the
bundles the cluster should be able to hold), bin-packs it onto the nodes there are (up or still
launching, busiest first) and launches nodes for what does not fit, up to each type's max; a
launched node is up after the launch delay. An up node that has run nothing for the idle
timeout, and that the target does not need, is removed (never below a type's min count).

Jobs ask for CPUs only and may spread over nodes (a job of many 1-CPU tasks), so the cluster is
a pool for admission; `place` still puts each running job's CPUs on nodes, busiest first, so a
node is idle exactly when no job runs on it. Node-seconds count from the launch (a launching
node is paid for) to the removal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specs.cluster import Capacity, NodeType, Scaling

LAUNCH_DELAY = 180.0
IDLE_TIMEOUT = 300.0
GIB = 2**30
MEMORY_PER_CPU = 4 * GIB
"""A node type's memory when the flag gives none; jobs ask for CPUs only, so it never binds."""


@dataclass(frozen=True)
class NodeModel:
    """The autoscaling cluster's shape and timing."""

    node_types: tuple[NodeType, ...]
    head: Capacity = field(default_factory=Capacity)  # what the head offers to jobs
    launch_delay: float = LAUNCH_DELAY
    idle_timeout: float = IDLE_TIMEOUT
    max_capacity: Capacity | None = None  # a configured budget (--max-capacity, maxCapacity)

    @property
    def reach(self) -> Capacity:
        """What Ray's autoscaler may launch: the head and every type at its max count."""
        total = self.head
        for t in self.node_types:
            total = total + scaled(t.resources, t.max_count)
        return total

    @property
    def ceiling(self) -> Capacity:
        """What rayqueue plans with: the reach, lowered per resource by the budget (as
        `core.scaling.merge` lowers what the autoscaler reports). Ray does not know the
        budget: its autoscaler still launches up to the max counts for whoever asks."""
        cap = self.max_capacity
        if cap is None:
            return self.reach
        r = self.reach
        return Capacity(min(r.cpu, cap.cpu), min(r.gpu, cap.gpu), min(r.memory, cap.memory))

    def static_counts(self) -> dict[str, int]:
        """The static cluster at the ceiling: per node type, in the order listed, as many
        nodes as hold what the ceiling has beyond the head (every max count without a budget;
        never below a type's min count)."""
        left = _floor0(self.ceiling - self.head)
        counts: dict[str, int] = {}
        for t in self.node_types:
            need = max(
                (
                    math.ceil(getattr(left, r) / getattr(t.resources, r) - 1e-9)
                    for r in ("cpu", "gpu", "memory")
                    if getattr(t.resources, r) > 0 and getattr(left, r) > 1e-9
                ),
                default=0,
            )
            counts[t.name] = max(min(t.max_count, need), t.min_count)
            left = _floor0(left - scaled(t.resources, counts[t.name]))
        return counts

    def scaled_nodes(self, counts: Mapping[str, int]) -> int:
        """Of `counts` nodes per type, those the autoscaler launches or may remove: the ones
        above each type's min count. A type with min = max (a queue file's head) has none."""
        return sum(max(0, counts.get(t.name, 0) - t.min_count) for t in self.node_types)

    @property
    def max_nodes(self) -> int:
        return self.scaled_nodes({t.name: t.max_count for t in self.node_types})


def _floor0(c: Capacity) -> Capacity:
    return Capacity(max(c.cpu, 0.0), max(c.gpu, 0.0), max(c.memory, 0.0))


def scaled(c: Capacity, n: float) -> Capacity:
    return Capacity(c.cpu * n, c.gpu * n, c.memory * n)


def parse_node_type(text: str) -> NodeType:
    """`small:cpu=8,max=16[,min=0,gpu=1,memory=32]` (memory in GiB) -> NodeType."""
    name, sep, rest = text.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"{text!r}: NAME:cpu=N,max=M[,min=K,gpu=G,memory=GIB]")
    values: dict[str, float] = {}
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in ("cpu", "gpu", "memory", "max", "min"):
            raise ValueError(f"{text!r}: unknown field {item.strip()!r}")
        try:
            values[key] = float(value)
        except ValueError:
            raise ValueError(f"{text!r}: {key} must be a number") from None
    cpu, top = values.get("cpu", 0.0), values.get("max")
    if cpu <= 0 or top is None or top < 1 or top != int(top):
        raise ValueError(f"{text!r}: needs cpu > 0 and max >= 1 (a whole number)")
    low = values.get("min", 0.0)
    if low < 0 or low > top or low != int(low):
        raise ValueError(f"{text!r}: min must be a whole number 0..max")
    memory = values.get("memory", cpu * MEMORY_PER_CPU / GIB) * GIB
    return NodeType(name.strip(), Capacity(cpu, values.get("gpu", 0.0), memory), int(top), int(low))


def split(demand: Capacity, node_types: Sequence[NodeType]) -> list[Capacity]:
    """A job's CPUs as bundles no larger than the largest node type: what a job that spreads
    over nodes asks Ray for (70 CPUs on 32-CPU nodes: 32, 32, 6)."""
    largest = max((t.resources.cpu for t in node_types), default=0.0)
    if largest <= 0 or demand.cpu <= largest:
        return [demand]
    parts = math.ceil(demand.cpu / largest - 1e-9)
    bundles = []
    left = demand.cpu
    for _ in range(parts):
        take = min(largest, left)
        bundles.append(
            Capacity(take, demand.gpu * take / demand.cpu, demand.memory * take / demand.cpu)
        )
        left -= take
    return bundles


@dataclass
class Node:
    name: str
    type: NodeType
    launched: float
    up_at: float
    removed: float | None = None
    used: float = 0.0  # CPUs of the jobs placed on it
    idle_since: float | None = None  # when it last had nothing to run (None: busy)

    def alive(self) -> bool:
        return self.removed is None

    def up(self, now: float) -> bool:
        return self.removed is None and self.up_at <= now


class Nodes:
    """The nodes of one simulated run, from time `start`."""

    def __init__(self, model: NodeModel, start: float = 0.0) -> None:
        self.model = model
        self.nodes: list[Node] = []
        self.placed: dict[str, list[tuple[Node | None, float]]] = {}  # job -> (node, CPUs)
        self.head_used = 0.0
        self.start = start
        self.launches = 0  # by the autoscaler: the min-count nodes there from the start are not
        self.removals = 0
        self.peak = 0  # the most nodes alive above the min counts
        for t in model.node_types:
            for _ in range(t.min_count):
                self._launch(t, start, delay=0.0)
        self.launches = 0

    # What the planner sees.

    def capacity(self, now: float) -> Capacity:
        total = self.model.head
        for n in self.nodes:
            if n.up(now):
                total = total + n.type.resources
        return total

    def scaling(self, now: float) -> Scaling:
        pending = tuple(n.type.name for n in self.nodes if n.alive() and not n.up(now))
        return Scaling(
            ceiling=self.model.ceiling,
            node_types=self.model.node_types,
            source="autoscaler",
            pending=pending,
        )

    # What Ray does.

    def place(self, running: Mapping[str, float], now: float) -> None:
        """Make the placement follow `running` (job -> CPUs): release the jobs gone, put the
        new ones on the head, then on up nodes busiest first. A node that empties starts its
        idle clock now."""
        for job in [j for j in self.placed if j not in running]:
            for node, cpu in self.placed.pop(job):
                if node is None:
                    self.head_used -= cpu
                else:
                    node.used -= cpu
                    if node.used <= 1e-9:
                        node.used, node.idle_since = 0.0, now
        for job, cpu in running.items():
            if job in self.placed:
                continue
            parts: list[tuple[Node | None, float]] = []
            left = cpu
            head_free = self.model.head.cpu - self.head_used
            if head_free > 1e-9 and left > 1e-9:
                take = min(head_free, left)
                self.head_used += take
                parts.append((None, take))
                left -= take
            for node in sorted(
                (n for n in self.nodes if n.up(now)), key=lambda n: (-n.used, n.name)
            ):
                if left <= 1e-9:
                    break
                free = node.type.resources.cpu - node.used
                if free <= 1e-9:
                    continue
                take = min(free, left)
                node.used += take
                node.idle_since = None
                parts.append((node, take))
                left -= take
            if left > 1e-6:
                raise RuntimeError(f"job {job} started with {left:g} CPUs more than are free")
            self.placed[job] = parts

    def scale(self, bundles: Sequence[Capacity] | None, now: float) -> None:
        """One autoscaler round with the standing request `bundles` (None or empty: none)."""
        needed = self._fit(list(bundles or ()), now)
        for node in self.nodes:
            if not node.up(now) or node.used > 0 or id(node) in needed:
                continue
            idle = node.idle_since if node.idle_since is not None else node.up_at
            count = sum(1 for n in self.nodes if n.alive() and n.type == node.type)
            if now - idle >= self.model.idle_timeout - 1e-9 and count > node.type.min_count:
                node.removed = now
                self.removals += 1

    def next_due(self, now: float) -> float | None:
        """The next instant at which a node comes up or an idle one may go."""
        times = []
        for n in self.nodes:
            if not n.alive():
                continue
            if n.up_at > now:
                times.append(n.up_at)
            elif n.used <= 0:
                idle = n.idle_since if n.idle_since is not None else n.up_at
                due = idle + self.model.idle_timeout
                if due > now:
                    times.append(due)
        return min(times, default=None)

    # What it cost.

    def node_seconds(self, end: float) -> float:
        """Node-seconds of the nodes the autoscaler launched or could remove, from launch to
        removal: each type's min-count nodes (alive from the start to the end, whatever
        happens, like the head) are left out, so a type with min = max counts nothing."""
        alive = sum(max(0.0, min(n.removed or end, end) - n.launched) for n in self.nodes)
        fixed = sum(t.min_count for t in self.model.node_types) * max(0.0, end - self.start)
        return max(0.0, alive - fixed)

    def up_cpu_seconds(self, start: float, end: float) -> float:
        """CPU-seconds the cluster offered to jobs over [start, end]: the head and up nodes."""
        total = self.model.head.cpu * max(0.0, end - start)
        for n in self.nodes:
            begin, stop = max(n.up_at, start), min(n.removed or end, end)
            total += n.type.resources.cpu * max(0.0, stop - begin)
        return total

    def last_change(self) -> float:
        return max((n.removed or n.up_at for n in self.nodes), default=0.0)

    # The autoscaler's packing.

    def _fit(self, bundles: list[Capacity], now: float) -> set[int]:
        """Pack `bundles`, largest first, onto the nodes alive (busy, then idle, then launching),
        launching more where none has room; return the ids of the nodes the target needs."""
        bins: list[tuple[Node | None, Capacity]] = []
        if self.model.head.cpu > 0:
            bins.append((None, self.model.head))
        alive = [n for n in self.nodes if n.alive()]
        alive.sort(key=lambda n: (not n.up(now), -n.used, n.up_at, n.name))
        bins += [(n, n.type.resources) for n in alive]
        needed: set[int] = set()
        for bundle in sorted(bundles, key=lambda b: (b.gpu, b.cpu, b.memory), reverse=True):
            for index, (node, room) in enumerate(bins):
                if bundle.fits_in(room):
                    bins[index] = (node, room - bundle)
                    if node is not None:
                        needed.add(id(node))
                    break
            else:
                kind = self._type_for(bundle)
                if kind is None:
                    continue  # over every max count, or no type fits: the ceiling holds
                node = self._launch(kind, now, delay=self.model.launch_delay)
                bins.append((node, kind.resources - bundle))
                needed.add(id(node))
        return needed

    def _type_for(self, bundle: Capacity) -> NodeType | None:
        """The smallest node type that holds `bundle` and is below its max count."""
        for t in sorted(
            self.model.node_types, key=lambda t: (t.resources.gpu, t.resources.cpu, t.name)
        ):
            count = sum(1 for n in self.nodes if n.alive() and n.type == t)
            if bundle.fits_in(t.resources) and count < t.max_count:
                return t
        return None

    def _launch(self, kind: NodeType, now: float, *, delay: float) -> Node:
        self.launches += 1
        node = Node(f"{kind.name}-{len(self.nodes) + 1}", kind, now, now + delay)
        self.nodes.append(node)
        fixed = sum(t.min_count for t in self.model.node_types)
        self.peak = max(self.peak, sum(1 for n in self.nodes if n.alive()) - fixed)
        return node
