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
from specs.task.status import TaskStatusBody

__all__ = ["Gated", "gate_dependencies"]


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
    graph = {
        name: task.spec.depends_on
        for name, spec in specs.items()
        if (task := spec.task or spec.last_valid) is not None and task.spec.depends_on
    }
    names = _dependency_views(bodies)  # names resolved in the dependent's folder first
    edges = {n: [t for d in deps for t in names.targets(n, d.name)] for n, deps in graph.items()}
    cycles = dependencies.find_cycles(edges)
    acyclic: list[QueuedCandidate] = []
    for waiting in reconciled.queue:  # cycles first, so dependents see them as they end up
        name = waiting.candidate.name
        if name in cycles:
            bodies[name] = lifecycle.dependency_cycle(bodies[name], cycles[name])
        else:
            acyclic.append(waiting)
    views = _dependency_views(bodies)
    kept: list[QueuedCandidate] = []
    for waiting in acyclic:
        name = waiting.candidate.name
        deps = reconciled.tasks[name].spec.depends_on
        body = bodies[name]
        if lifecycle.in_cycle(body):
            body = bodies[name] = lifecycle.cycle_resolved(body)
        if not deps:
            kept.append(waiting)
            continue
        judgement = dependencies.judge(deps, views.of(name, deps))
        if not judgement.met:
            bodies[name] = lifecycle.hold(body, judgement.gate, judgement.message)
            continue
        queued = to_epoch(body.queued_at) or inputs.now
        if judgement.met_at is not None and judgement.met_at > queued:
            queued = judgement.met_at
            body = lifecycle.date_queue_entry(body, to_datetime(queued))
        bodies[name] = body
        kept.append(QueuedCandidate(waiting.key._replace(queued_at=queued), waiting.candidate))
    return Gated(bodies, kept)


def _dependency_views(bodies: Mapping[str, TaskStatusBody]) -> DependencyViews:
    return DependencyViews(
        {
            name: dependencies.RunView(body.phase, to_epoch(body.finished_at))
            for name, body in bodies.items()
        }
    )
