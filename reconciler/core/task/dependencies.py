"""Dependencies between tasks: may a task start, and if not, why.

Pure. A condition is judged against the dependency's *latest* run, which is what its status
shows: a dependency that failed and is rerun and then succeeds lets its dependents go (Slurm
keeps such a dependency failed for good). Cycles are found with Tarjan's algorithm, iteratively,
in one pass linear in the number of edges.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from specs.task.models import FINISHED, Phase, Reason
from specs.task.pipeline import DependencySpec

SUCCEEDED = "Succeeded"
FAILED = "Failed"
FINISHED_ANY = "Finished"

# Every end but success counts as "Failed" (Slurm's afternotok: non-zero exit, timeout, node
# failure, cancellation).
_UNSUCCESSFUL = FINISHED - {Phase.SUCCEEDED}


# When dependencies disagree, the status shows the one that most needs the user.
_RANK = {
    Reason.DEPENDENCIES_MET: 0,
    Reason.WAITING_FOR_DEPENDENCY: 1,
    Reason.DEPENDENCY_MISSING: 2,
    Reason.DEPENDENCY_FAILED: 3,
    Reason.DEPENDENCY_CYCLE: 4,
}


@dataclass(frozen=True)
class RunView:
    """What a dependent needs to know of another task: its phase and when its run ended."""

    phase: Phase
    finished_at: float | None = None


@dataclass(frozen=True)
class DependencyState:
    """One dependency of one task, as `rayqueue describe` shows it."""

    name: str
    condition: str
    gate: Reason  # DependenciesMet, WaitingForDependency, DependencyMissing or -Failed
    phase: Phase | None  # None: no such task

    def describe(self) -> str:
        shown = self.phase.value if self.phase is not None else "missing"
        state = {
            Reason.DEPENDENCIES_MET: "met",
            Reason.WAITING_FOR_DEPENDENCY: "waiting",
            Reason.DEPENDENCY_MISSING: "waiting",
            Reason.DEPENDENCY_FAILED: "cannot be met",
        }.get(self.gate, "")
        return f"{self.name} ({self.condition}): {shown}, {state}"


@dataclass(frozen=True)
class Judgement:
    gate: Reason  # DependenciesMet, or why not
    message: str
    met_at: float | None = None  # when the last dependency was met; its FIFO age starts there
    states: tuple[DependencyState, ...] = ()

    @property
    def met(self) -> bool:
        return self.gate is Reason.DEPENDENCIES_MET


def satisfies(condition: str, phase: Phase) -> bool | None:
    """True: met. False: this run ended the wrong way. None: not ended yet."""
    if phase not in FINISHED:
        return None
    if condition == SUCCEEDED:
        return phase is Phase.SUCCEEDED
    if condition == FAILED:
        return phase in _UNSUCCESSFUL
    if condition == FINISHED_ANY:
        return True
    raise ValueError(f"unknown dependency condition {condition!r}")


def judge(deps: Sequence[DependencySpec], views: Mapping[str, RunView]) -> Judgement:
    """May a task with these dependencies start, given every task's latest run?"""
    states: list[DependencyState] = []
    waiting: list[str] = []
    missing: list[str] = []
    failed: list[str] = []
    met_at: float | None = None
    all_times = True
    for dep in deps:
        view = views.get(dep.name)
        if view is None:
            states.append(DependencyState(dep.name, dep.condition, Reason.DEPENDENCY_MISSING, None))
            missing.append(dep.name)
            continue
        verdict = satisfies(dep.condition, view.phase)
        if verdict is None:
            gate = Reason.WAITING_FOR_DEPENDENCY
            waiting.append(f"{dep.name} ({view.phase.value})")
        elif verdict:
            gate = Reason.DEPENDENCIES_MET
            if view.finished_at is None:
                all_times = False
            else:
                met_at = view.finished_at if met_at is None else max(met_at, view.finished_at)
        else:
            gate = Reason.DEPENDENCY_FAILED
            failed.append(
                f"{dep.name} ended {view.phase.value}, needs {dep.condition}; "
                f"this task runs once a new run of {dep.name} ends so "
                f"(rayqueue rerun {dep.name})"
            )
        states.append(DependencyState(dep.name, dep.condition, gate, view.phase))
    gate = max((s.gate for s in states), key=_RANK.__getitem__, default=Reason.DEPENDENCIES_MET)
    if gate is Reason.DEPENDENCIES_MET:
        return Judgement(gate, "dependencies met", met_at if all_times else None, tuple(states))
    parts = list(failed)
    if missing:
        parts.append("waits for " + ", ".join(missing) + ": no such task (yet)")
    if waiting:
        parts.append("waits for " + ", ".join(waiting))
    return Judgement(gate, "; ".join(parts), None, tuple(states))


def strongly_connected(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (a long chain must not hit
    Python's recursion limit). Edges to names that are not keys are ignored."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    succ = {v: [w for w in dict.fromkeys(ws) if w in edges] for v, ws in edges.items()}
    counter = 0
    for root in sorted(succ):
        if root in index:
            continue
        # Each frame: a node and the position of the next successor to look at.
        frames: list[tuple[str, int]] = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while frames:
            v, i = frames[-1]
            if i < len(succ[v]):
                frames[-1] = (v, i + 1)
                w = succ[v][i]
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    frames.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            frames.pop()
            if frames:
                parent = frames[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                component: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                components.append(component)
    return components


def find_cycles(edges: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Every task that is part of a dependency cycle -> a message showing one such cycle."""
    succ = {v: list(dict.fromkeys(ws)) for v, ws in edges.items()}
    result: dict[str, str] = {}
    for component in strongly_connected(succ):
        members = set(component)
        start = min(members)
        if len(members) == 1 and start not in succ[start]:
            continue  # a single task that does not depend on itself
        message = cycle_message(_cycle_through(start, succ, members), members)
        for name in members:
            result[name] = message
    return result


# The names a cycle's message shows at most, on its path and off it: every member carries the
# message, so naming them all would make the statuses of a long ring grow as its square.
CYCLE_NAMES_SHOWN = 8


def cycle_message(path: Sequence[str], members: AbstractSet[str]) -> str:
    """The message of every member of a cycle: `path`, a shortest cycle (its first name again
    at its end), and the members off it; past CYCLE_NAMES_SHOWN names, the count of the rest."""
    ring = list(path[:-1])
    others = sorted(members - set(ring))
    if len(ring) <= CYCLE_NAMES_SHOWN and len(others) <= CYCLE_NAMES_SHOWN:
        message = "dependency cycle: " + " -> ".join(path)
        return message + (f" (also in the cycle: {', '.join(others)})" if others else "")
    shown = ring[:CYCLE_NAMES_SHOWN]
    if len(ring) > len(shown):
        shown.append(f"... ({len(ring) - len(shown)} more)")
    message = f"dependency cycle of {len(members)} tasks: " + " -> ".join([*shown, ring[0]])
    if others:
        listed = ", ".join(others[:CYCLE_NAMES_SHOWN])
        rest = len(others) - CYCLE_NAMES_SHOWN
        message += f" (also in the cycle: {listed}{f' and {rest} more' if rest > 0 else ''})"
    return message


def _cycle_through(start: str, succ: Mapping[str, list[str]], members: set[str]) -> list[str]:
    """A shortest cycle from `start` back to it, by breadth-first search inside its component."""
    parent: dict[str, str] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        v = queue.popleft()
        for w in succ[v]:
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if w in members and w not in seen:
                seen.add(w)
                parent[w] = v
                queue.append(w)
    raise AssertionError(f"{start} is in a strongly connected component but on no cycle")
