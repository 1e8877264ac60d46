"""Autoscaling, the pure part: what the cluster can grow to (`ceiling_of`, and
`merge`, which the shell calls to join configuration and the autoscaler's report), and how a
task's request is cut into bundles that the node types can hold (`shape`).

A bundle is what must fit on one node. Ray's autoscaler launches nodes for the bundles it is
asked for; a bundle that fits no node type is infeasible and buys nothing, so a request larger
than any node is split into node-sized bundles here."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from reconciler.core.resources import resources_text
from specs.cluster import Capacity, NodeType, Scaling
from specs.queues.config import ClusterSection

_EPS = 1e-9
RESOURCES = ("cpu", "gpu", "memory")


def _get(amounts: Capacity, resource: str) -> float:
    return float(getattr(amounts, resource))


def _larger(a: Capacity, b: Capacity) -> Capacity:
    return Capacity(max(a.cpu, b.cpu), max(a.gpu, b.gpu), max(a.memory, b.memory))


def _smaller(a: Capacity, b: Capacity) -> Capacity:
    return Capacity(min(a.cpu, b.cpu), min(a.gpu, b.gpu), min(a.memory, b.memory))


def ceiling_of(capacity: Capacity, scaling: Scaling | None) -> Capacity:
    """The most the cluster can hold: the ceiling, but never less than what it has now (a
    configured ceiling below the cluster of the moment is stale, not a limit)."""
    if scaling is None:
        return capacity
    return _larger(capacity, scaling.ceiling)


def headroom(capacity: Capacity, scaling: Scaling | None) -> Capacity:
    """What new nodes could add to the cluster of the moment (>= 0 per resource)."""
    if scaling is None:
        return Capacity()
    return ceiling_of(capacity, scaling) - capacity


def merge(
    report: Scaling | None,
    node_types: Sequence[NodeType] = (),
    max_capacity: Capacity | None = None,
) -> Scaling | None:
    """One `Scaling` from the autoscaler's report and the configuration (`_queues.yaml`'s
    `cluster:` section and `--max-capacity`; the caller gives the smaller of the two caps).

    The report wins on facts: its node types, pending launches and failures are what Ray will
    really do. Configured node types stand in only where Ray reports none. A configured
    maximum only ever lowers the ceiling (a budget below what the autoscaler may launch);
    it never raises what Ray reports. None when neither says the cluster can grow."""
    if report is not None:
        if max_capacity is None:
            return report
        return Scaling(
            _smaller(report.ceiling, max_capacity),
            report.node_types,
            report.source,
            report.pending,
            report.failures,
        )
    if node_types:
        total = Capacity()
        for kind in node_types:
            total = total + _times(kind.resources, kind.max_count)
        ceiling = total if max_capacity is None else _smaller(total, max_capacity)
        return Scaling(ceiling, tuple(node_types), "config")
    if max_capacity is not None:
        # Only a budget: the cluster can grow to it; a resource the budget leaves out is not
        # said to grow at all (its ceiling is what the cluster has).
        return Scaling(_finite(max_capacity), (), "config")
    return None


def _finite(amounts: Capacity) -> Capacity:
    """`amounts`, with an uncapped (infinite) resource as 0."""
    return Capacity(
        *(
            0.0 if math.isinf(value) else value
            for value in (amounts.cpu, amounts.gpu, amounts.memory)
        )
    )


def from_config(
    report: Scaling | None,
    section: ClusterSection | None,
    max_capacity: Capacity | None = None,
) -> Scaling | None:
    """What the shell hands the planner each pass: the autoscaler's report (None when Ray
    reports no autoscaler) joined with `_queues.yaml`'s `spec.cluster` and `--max-capacity`
    (the smaller of the two caps holds), as `merge` rules."""
    caps = [section.max_capacity_value() if section is not None else None, max_capacity]
    cap = None
    for each in caps:
        if each is not None:
            cap = each if cap is None else _smaller(cap, each)
    kinds = section.node_type_values() if section is not None else ()
    return merge(report, kinds, cap)


def _times(amounts: Capacity, count: int) -> Capacity:
    return Capacity(amounts.cpu * count, amounts.gpu * count, amounts.memory * count)


# --- bundles -------------------------------------------------------------------------------


def fits_some(bundle: Capacity, node_types: Sequence[NodeType]) -> bool:
    """Whether one node of some type can hold `bundle` (True when no type is known)."""
    return not node_types or any(bundle.fits_in(kind.resources) for kind in node_types)


def misfit(bundles: Sequence[Capacity], node_types: Sequence[NodeType]) -> str | None:
    """Why a task's own bundles can never be placed: one fits no node type. None if all fit."""
    for index, bundle in enumerate(bundles, 1):
        if not fits_some(bundle, node_types):
            kinds = ", ".join(f"{k.name} ({_text(k.resources)})" for k in node_types)
            return (
                f"resources.bundles[{index}] ({_text(bundle)}) fits no node type the "
                f"autoscaler can launch: {kinds}"
            )
    return None


def _text(amounts: Capacity) -> str:
    return resources_text(amounts) or "nothing"


def _pieces(request: Capacity, node: Capacity) -> float:
    """How many bundles of at most `node` it takes to hold `request` (inf: never)."""
    count = 1.0
    for resource in RESOURCES:
        asked, has = _get(request, resource), _get(node, resource)
        if asked <= _EPS:
            continue
        if has <= _EPS:
            return math.inf
        count = max(count, math.ceil(asked / has - _EPS))
    return count


def shape(
    request: Capacity,
    node_types: Sequence[NodeType],
    bundles: Sequence[Capacity] = (),
) -> tuple[Capacity, ...]:
    """The bundles to ask the autoscaler for, for one task.

    The task's own `bundles` (spec.resources.bundles) are used as given. Otherwise a request
    that fits some node type is one bundle; a larger one is cut, greedily, into full pieces of
    the node type that takes the fewest of them (ties: the smaller node, then the name), the
    last piece holding the rest: 20 CPU, 2 GPU on 8-CPU/1-GPU nodes gives [8, 1], [8, 1], [4, 0].
    With no node types known (a configured ceiling only), it stays one bundle."""
    if bundles:
        return tuple(bundles)
    if not node_types or fits_some(request, node_types):
        return (request,)
    ranked = sorted(
        (_pieces(request, kind.resources), kind.resources.cpu, kind.name, kind.resources)
        for kind in node_types
    )
    count, _, _, node = ranked[0]
    if math.isinf(count):
        return (request,)  # no type holds it at all: Unschedulable already, asked as it is
    result = []
    rest = request
    while any(_get(rest, r) > _EPS for r in RESOURCES):
        piece = _smaller(rest, node)
        result.append(piece)
        rest = rest - piece
    return tuple(result)


def request_of(
    running: Iterable[tuple[Capacity, Sequence[Capacity]]],
    demand: Iterable[tuple[Capacity, Sequence[Capacity]]],
    node_types: Sequence[NodeType],
) -> tuple[Capacity, ...]:
    """The whole target for the autoscaler: what runs and what waits for nodes, each as
    (request, own bundles), shaped. Empty when nothing waits for nodes: the request is then
    cleared and Ray's own idle timeout may remove nodes."""
    wanted = [shape(req, node_types, own) for req, own in demand]
    if not wanted:
        return ()
    held = [shape(req, node_types, own) for req, own in running]
    return tuple(b for group in (*held, *wanted) for b in group)
