"""Dependencies kept between passes, for the incremental planner's fast pass
(core/incremental/fastpass.py; the full pass's stage: core/gates.py).

A waiting task with dependencies (or held in a dependency cycle: its waiter is `gated`)
passes the gates on what other tasks show, none of which its own version sees: the phase and
end (RunView) of each task its dependencies name, as every dependent of a pass sees it (the
reconciled bodies, those of waiting tasks in a cycle marked so, before anyone is held);
whether a name exists at all (a name resolves in the dependent's folder first, else from the
top; a missing one is waited for); and the cycles of the whole dependency graph. So the order
keeps (`Gates`): the graph (`needs`), from each name a dependency may resolve to the tasks
whose dependencies name it (`watchers`), what each watched task showed its dependents in the
last pass (`seen`), the cycles, and each gated task's result after the gates (`gated`).

A pass then gates again: the gated tasks it redoes anyway, the gated dependents of every
watched task whose view changed (it was redone, appeared or went), and the waiting tasks
whose cycle changed; the cycles are found again only when the graph may have changed (some
dependencies edited, or a watched name came or went). A dependent's dependents need nothing
more in the same pass: the gates read each task's reconciled body, never what another gate
made of it (a held task keeps its phase), so a change down a chain (A waits for B, which
waits for C) reaches A only once B's own status moved, in a later pass that redoes B.

A dependency on a whole array (all its elements must meet the condition) is not indexed
here: it would need every element in `DependencyViews` and in `watchers`. The gates keep the
names of the arrays present (`arrays`), and while a dependency may resolve to one of them
(`names_an_array`) the pass is the full one. A dependency on one element is one on a task.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

from reconciler.core.gates import (
    Gated,
    dependency_edges,
    dependency_graph,
    gate_waiting,
    run_view,
)
from reconciler.core.stages import QueuedCandidate
from reconciler.core.task import lifecycle
from reconciler.core.task.dependencies import RunView, find_cycles
from reconciler.core.task.depnames import DependencyViews
from reconciler.core.task.step import TaskResult
from specs.task.arrays import split
from specs.task.inputs import TaskInput
from specs.task.pipeline import DependencySpec
from specs.task.visibility import EVERYTHING, Visibility

__all__ = ["NO_GATES", "Gates", "after_full", "gate_again", "is_gated", "names_an_array"]


@dataclass(frozen=True)
class Gates:
    """The dependencies a pass leaves for the next fast one. Treat as immutable: a pass copies
    what it changes."""

    # Each task with dependencies (its last valid spec's): them.
    needs: Mapping[str, Sequence[DependencySpec]] = field(default_factory=dict)
    # A name some dependency may resolve to -> the tasks whose dependencies name it.
    watchers: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # Each task in a dependency cycle -> the message that shows one.
    cycles: Mapping[str, str] = field(default_factory=dict)
    # Each watched task that exists: what its dependents saw of it.
    seen: Mapping[str, RunView] = field(default_factory=dict)
    # Each gated waiting task: its result after the gates (its waiter None: held off the
    # queue; else its place in the queue, dated from when its dependencies were met).
    gated: Mapping[str, TaskResult] = field(default_factory=dict)
    # The arrays with an element present (or present since the full pass that kept them).
    arrays: frozenset[str] = frozenset()


# No dependency at all: what a pass leaves that kept none.
NO_GATES = Gates()


def names_an_array(gates: Gates) -> bool:
    """Whether some dependency may resolve to a whole array (then the pass is the full one)."""
    if not gates.watchers:
        return False
    return any(name in gates.watchers for name in gates.arrays)


def _arrays_of(names: Iterable[str]) -> Iterator[str]:
    for name in names:
        parts = split(name)
        if parts is not None:
            yield parts[0]


def is_gated(result: TaskResult | None) -> bool:
    """A waiting task the gates judge: it has dependencies, or is held in a cycle."""
    return result is not None and result.waiter is not None and result.waiter.gated


def after_full(
    specs: Mapping[str, TaskInput],
    results: Mapping[str, TaskResult],
    gated: Gated,
    visibility: Visibility = EVERYTHING,
) -> tuple[Gates, dict[str, TaskResult]]:
    """The gates a full pass leaves (`results`: every task's own; `gated`: the gates' stage),
    and each gated waiting task's result after them. `visibility`: the pass's (its options')."""
    needs = dependency_graph(specs)
    watchers = _watchers_of(needs)
    cycles = _cycles(needs, specs, results.__getitem__, visibility)
    views = _Views(specs, results.__getitem__, cycles)
    seen = {name: views[name] for name in watchers if name in specs}
    after: dict[str, TaskResult] = {}
    keys = None
    for name, result in results.items():
        if not is_gated(result):
            continue
        if keys is None:
            keys = {q.candidate.name: q.key for q in gated.queue}
        waiter = result.waiter
        assert waiter is not None
        key = keys.get(name)
        through = None if key is None else waiter._replace(key=key)
        after[name] = result._replace(body=gated.bodies[name], waiter=through)
    arrays = frozenset(_arrays_of(specs))
    return Gates(needs, watchers, cycles, seen, after, arrays), after


def gate_again(
    now: float,
    gates: Gates,
    specs: Mapping[str, TaskInput],
    result_of: Callable[[str], TaskResult],
    redone: Collection[str],
    deleted: Collection[str],
    carried: Collection[str],
    reconcile: Callable[[str], TaskResult],
    visibility: Visibility = EVERYTHING,
) -> tuple[Gates, dict[str, TaskResult]]:
    """The gates after a fast pass that redid `redone` (`result_of`: each task's own result
    in this pass), carried others' results over to their new status (`carried`: what they
    show may have moved too) and saw `deleted` go, and the result after the gates of each
    gated task they judged again. `reconcile`: redo a dependent the pass had not redone (its
    memo holds: the same result), to be merged into the pass with the redone ones."""
    needs, watchers = _edit_graph(gates, specs, chain(redone, deleted))
    cycles: Mapping[str, str] = gates.cycles
    if (
        needs is not gates.needs
        or any(n in gates.watchers for n in deleted)
        or any(n in watchers and n not in gates.seen for n in redone)  # appeared
    ):
        cycles = _cycles(needs, specs, result_of, visibility)
    recycled = {
        n for n in cycles.keys() | gates.cycles.keys() if cycles.get(n) != gates.cycles.get(n)
    }
    views = _Views(specs, result_of, cycles)
    woken = _Woken(specs, result_of, reconcile, set(redone), _seen_watched(gates, watchers, views))
    for name in chain(redone, recycled):
        woken.judge(name)
    woken.follow(watchers, views, chain(redone, deleted, carried, recycled))
    names = DependencyViews(views, {}, visibility)
    after = {n: _through_gates(now, n, result_of(n), names, cycles) for n in woken.again}
    gated = gates.gated
    dropped = [n for n in chain(redone, deleted) if n in gated and n not in after]
    if after or dropped:
        gated = dict(gated)
        for name in dropped:
            del gated[name]
        gated.update(after)
    arrays = gates.arrays
    added = set(_arrays_of(redone)) - arrays
    if added:
        arrays = arrays | added
    return Gates(needs, watchers, cycles, woken.seen, gated, arrays), after


def _seen_watched(
    gates: Gates, watchers: Mapping[str, frozenset[str]], views: Mapping[str, RunView]
) -> Mapping[str, RunView]:
    """What each watched task showed: the names watched anew show what they show now; those
    no longer watched go (the very mapping of `gates` when the watched names did not move)."""
    if watchers is gates.watchers:
        return gates.seen
    seen = dict(gates.seen)
    for name in watchers.keys() - gates.watchers.keys():
        if name in views:
            seen[name] = views[name]
    for name in gates.watchers.keys() - watchers.keys():
        seen.pop(name, None)
    return seen


@dataclass
class _Woken:
    """The gated tasks a fast pass judges again, found as what they watch moves."""

    specs: Mapping[str, TaskInput]
    result_of: Callable[[str], TaskResult]
    reconcile: Callable[[str], TaskResult]
    done: set[str]  # the tasks the pass redid (or reconciled here)
    seen: Mapping[str, RunView]  # copied once it changes
    again: set[str] = field(default_factory=set)  # the gated tasks to judge again
    found: set[str] = field(default_factory=set)  # those reconciled here: what they show

    def judge(self, name: str) -> None:
        """Gate `name` again if it is a gated waiting task (redone first if it was not)."""
        if name in self.again or name not in self.specs or not is_gated(self.result_of(name)):
            return
        if name not in self.done:
            self.reconcile(name)  # (its memo holds: it shows what it showed)
            self.done.add(name)
            self.found.add(name)
        if is_gated(self.result_of(name)):
            self.again.add(name)

    def follow(
        self,
        watchers: Mapping[str, frozenset[str]],
        views: Mapping[str, RunView],
        moved: Iterable[str],
    ) -> None:
        """Judge again the dependents of each of `moved` whose view is not what they saw, and
        so on for those reconciled to judge them."""
        look = set(moved)
        writable: dict[str, RunView] | None = None
        while look:
            woken: set[str] = set()
            for name in look:
                dependents = watchers.get(name)
                if dependents is None:
                    continue
                view = views.get(name)
                if view != self.seen.get(name):
                    if writable is None:
                        self.seen = writable = dict(self.seen)
                    if view is None:
                        writable.pop(name, None)
                    else:
                        writable[name] = view
                    woken |= dependents
            self.found = set()
            for name in woken:
                self.judge(name)
            look = self.found


def _through_gates(
    now: float, name: str, result: TaskResult, views: DependencyViews, cycles: Mapping[str, str]
) -> TaskResult:
    """A gated waiting task's result after the gates (gates.gate_dependencies, for one task):
    its body, and its waiter with its place dated, or None while it waits off the queue."""
    waiter = result.waiter
    assert waiter is not None
    if name in cycles:
        return result._replace(
            body=lifecycle.dependency_cycle(result.body, cycles[name]), waiter=None
        )
    waiting = QueuedCandidate(waiter.key, waiter.candidate)
    deps = waiter.task.spec.depends_on
    body, admitted = gate_waiting(now, waiting, deps, result.body, views)
    through = None if admitted is None else waiter._replace(key=admitted.key)
    return result._replace(body=body, waiter=through)


def _edit_graph(
    gates: Gates, specs: Mapping[str, TaskInput], names: Iterator[str]
) -> tuple[Mapping[str, Sequence[DependencySpec]], Mapping[str, frozenset[str]]]:
    """The graph and its watchers with the dependencies of `names` as their specs now give
    them (none for a task gone): the very mappings of `gates` when none changed."""
    needs, watchers = gates.needs, gates.watchers
    edits: dict[str, Sequence[DependencySpec]] = {}
    for name in names:
        spec = specs.get(name)
        task = (spec.task or spec.last_valid) if spec is not None else None
        deps: Sequence[DependencySpec] = task.spec.depends_on if task is not None else ()
        old = needs.get(name, ())
        if deps is not old and list(deps) != list(old):
            edits[name] = deps
    if not edits:
        return needs, watchers
    graph = dict(needs)
    index = dict(watchers)
    for name, deps in edits.items():
        for watched in _named_by(name, graph.pop(name, ())):
            left = index[watched] - {name}
            if left:
                index[watched] = left
            else:
                del index[watched]
        if deps:
            graph[name] = deps
            for watched in _named_by(name, deps):
                index[watched] = index.get(watched, frozenset()) | {name}
    return graph, index


def _watchers_of(needs: Mapping[str, Sequence[DependencySpec]]) -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for name, deps in needs.items():
        for watched in _named_by(name, deps):
            found.setdefault(watched, set()).add(name)
    return {watched: frozenset(names) for watched, names in found.items()}


def _named_by(dependent: str, deps: Sequence[DependencySpec]) -> set[str]:
    """Every name `dependent`'s dependencies may resolve to (DependencyViews.resolve): in its
    folder, and from the top."""
    folder = dependent.rpartition("/")[0]
    names: set[str] = set()
    for dep in deps:
        if dep.name.startswith("/"):
            names.add(dep.name.lstrip("/"))
            continue
        if folder:
            names.add(f"{folder}/{dep.name}")
        names.add(dep.name)
    return names


def _cycles(
    needs: Mapping[str, Sequence[DependencySpec]],
    specs: Mapping[str, TaskInput],
    result_of: Callable[[str], TaskResult],
    visibility: Visibility,
) -> dict[str, str]:
    """The dependency cycles of the graph, its names resolved among the tasks of `specs`."""
    if not needs:
        return {}
    names = DependencyViews(_Views(specs, result_of, {}), {}, visibility)
    return find_cycles(dependency_edges(needs, names))


class _Views(Mapping[str, RunView]):
    """Each task's view for its dependents in this pass, built when asked: its reconciled
    body, marked as in its cycle if it waits in one (gates.gate_dependencies)."""

    def __init__(
        self,
        specs: Mapping[str, TaskInput],
        result_of: Callable[[str], TaskResult],
        cycles: Mapping[str, str],
    ) -> None:
        self.specs = specs
        self.result_of = result_of
        self.cycles = cycles

    def __getitem__(self, name: str) -> RunView:
        if name not in self.specs:
            raise KeyError(name)
        result = self.result_of(name)
        body = result.body
        if result.waiter is not None and name in self.cycles:
            body = lifecycle.dependency_cycle(body, self.cycles[name])
        return run_view(body)

    def __contains__(self, name: object) -> bool:
        return name in self.specs

    def __iter__(self) -> Iterator[str]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)
