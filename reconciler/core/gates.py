"""Dependency gates, the stage of a pass before admission: who waits for dependencies (or sits
in a cycle) rather than for resources, and from when the others' queue age counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.stages import PassInputs, QueuedCandidate, Reconciled
from reconciler.core.task import dependencies, lifecycle
from reconciler.core.task.depnames import DependencyViews
from reconciler.core.timestamps import to_datetime, to_epoch
from specs.task.inputs import TaskInput
from specs.task.pipeline import DependencySpec
from specs.task.status import TaskStatusBody
from specs.task.visibility import Visibility

__all__ = [
    "Gated",
    "dependency_edges",
    "dependency_graph",
    "gate_dependencies",
    "gate_waiting",
    "run_view",
]


@dataclass(frozen=True)
class Gated:
    """The bodies after the gates, and the waiting tasks they let through to admission."""

    bodies: Mapping[str, TaskStatusBody]
    queue: Sequence[QueuedCandidate]


def gate_dependencies(
    inputs: PassInputs, specs: Mapping[str, TaskInput], reconciled: Reconciled
) -> Gated:
    """Take out of the queue whatever waits for dependencies; date the rest's FIFO age from
    when their last dependency was met, so a task dropped in early does not jump the queue.

    Only tasks that have not started are judged: a running or finished dependent is never
    stopped because a dependency starts a new run."""
    if not reconciled.gated:
        return Gated(reconciled.bodies, reconciled.queue)
    bodies = dict(reconciled.bodies)
    visibility = inputs.options.visibility
    names = _dependency_views(bodies, visibility)  # resolved in the dependent's folder first
    # Every edge is to a task its source may see, so every token that reads a member of a
    # cycle reads all of them: a cycle's message names no task its reader may not see.
    cycles = dependencies.find_cycles(dependency_edges(dependency_graph(specs), names))
    acyclic: list[QueuedCandidate] = []
    for waiting in reconciled.queue:  # cycles first, so dependents see them as they end up
        name = waiting.candidate.name
        if name in cycles:
            bodies[name] = lifecycle.dependency_cycle(bodies[name], cycles[name])
        else:
            acyclic.append(waiting)
    views = _dependency_views(bodies, visibility)
    kept: list[QueuedCandidate] = []
    for waiting in acyclic:
        name = waiting.candidate.name
        deps = reconciled.tasks[name].spec.depends_on
        bodies[name], admitted = gate_waiting(inputs.now, waiting, deps, bodies[name], views)
        if admitted is not None:
            kept.append(admitted)
    return Gated(bodies, kept)


def dependency_graph(specs: Mapping[str, TaskInput]) -> dict[str, Sequence[DependencySpec]]:
    """Each task with dependencies (its last valid spec's, if it has no valid one): them."""
    return {
        name: task.spec.depends_on
        for name, spec in specs.items()
        if (task := spec.task or spec.last_valid) is not None and task.spec.depends_on
    }


def dependency_edges(
    graph: Mapping[str, Sequence[DependencySpec]], names: DependencyViews
) -> dict[str, list[str]]:
    """Each task of `graph`: the tasks its dependencies name, as `names` resolves them."""
    return {n: [t for d in deps for t in names.targets(n, d.name)] for n, deps in graph.items()}


def gate_waiting(
    now: float,
    waiting: QueuedCandidate,
    deps: Sequence[DependencySpec],
    body: TaskStatusBody,
    views: DependencyViews,
) -> tuple[TaskStatusBody, QueuedCandidate | None]:
    """A waiting task outside any cycle through the gates: its body, and its place in the
    queue (None: it waits for its dependencies, off the queue)."""
    if lifecycle.in_cycle(body):
        body = lifecycle.cycle_resolved(body)
    if not deps:
        return body, waiting
    judgement = dependencies.judge(deps, views.of(waiting.candidate.name, deps))
    if not judgement.met:
        return lifecycle.hold(body, judgement.gate, judgement.message), None
    queued = to_epoch(body.queued_at) or now
    if judgement.met_at is not None and judgement.met_at > queued:
        queued = judgement.met_at
        body = lifecycle.date_queue_entry(body, to_datetime(queued))
    return body, QueuedCandidate(waiting.key._replace(queued_at=queued), waiting.candidate)


def run_view(body: TaskStatusBody) -> dependencies.RunView:
    """What a dependent sees of a task with this body."""
    return dependencies.RunView(body.phase, to_epoch(body.finished_at))


def _dependency_views(
    bodies: Mapping[str, TaskStatusBody], visibility: Visibility
) -> DependencyViews:
    return DependencyViews(
        {name: run_view(body) for name, body in bodies.items()}, None, visibility
    )
