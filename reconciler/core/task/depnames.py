"""What a name in `dependsOn` refers to, and what its run looks like to a dependent.

A name is looked up in the depending task's folder first, then from the top (a leading `/`
means from the top only): a pipeline copied into `team-b/` waits for `team-b/prepare`. A name
may be an array (all its elements must meet the condition) or one element (`sweep[3]`).

From the top, a name reaches only the tasks the depending task's folder may see
(specs.task.visibility): else it stays in the folder (and, missing there, is waited for as
any missing name). A name that can only be read from the top (`/team-b/x`, or any name of a
task outside every folder) and reaches a task the folder may not see makes the spec Invalid
(`hidden`), whether that task exists or not: what a team learns of another folder is nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from reconciler.core.task.dependencies import RunView, satisfies
from specs.task.arrays import split
from specs.task.pipeline import DependencySpec
from specs.task.visibility import EVERYTHING, Visibility


def hidden(dependent: str, deps: Sequence[DependencySpec], visibility: Visibility) -> str | None:
    """The first of `dependent`'s dependencies whose only reading is a task its folder may
    not see, or None."""
    folder = dependent.rpartition("/")[0]
    for dep in deps:
        if folder and not dep.name.startswith("/"):
            continue  # it may always be read in the folder
        if not visibility.sees(dependent, dep.name.lstrip("/")):
            return dep.name
    return None


class DependencyViews:
    """Every task's latest run, by name, with arrays seen as one run each."""

    def __init__(
        self,
        views: Mapping[str, RunView],
        elements: Mapping[str, list[str]] | None = None,
        visibility: Visibility = EVERYTHING,
    ) -> None:
        """`elements`: each array's element names, in the order of `views`, when the caller
        knows them (else found by looking at every name); `visibility`: which tasks each
        folder may see."""
        self.views = views
        self.visibility = visibility
        self.elements: Mapping[str, list[str]]
        if elements is not None:
            self.elements = elements
            return
        found: dict[str, list[str]] = {}
        for name in views:
            parts = split(name)
            if parts is not None:
                found.setdefault(parts[0], []).append(name)
        self.elements = found

    def known(self, name: str) -> bool:
        return name in self.views or name in self.elements

    def resolve(self, dependent: str, name: str) -> str:
        """The task (or array) that `name`, written in `dependent`'s spec, stands for."""
        if name.startswith("/"):
            return name.lstrip("/")
        folder = dependent.rpartition("/")[0]
        if folder and (
            self.known(local := f"{folder}/{name}") or not self.visibility.sees(dependent, name)
        ):
            return local
        return name

    def targets(self, dependent: str, name: str) -> list[str]:
        """The tasks `name` waits for: the task itself, or each element of an array; none
        that `dependent`'s folder may not see (no cycle goes through one)."""
        resolved = self.resolve(dependent, name)
        if self.visibility.readers and not self.visibility.sees(dependent, resolved):
            return []
        return self.elements.get(resolved, [resolved])

    def of(self, dependent: str, deps: Sequence[DependencySpec]) -> dict[str, RunView]:
        """The view of each dependency of `dependent`, under the name its spec gives."""
        out: dict[str, RunView] = {}
        for dep in deps:
            resolved = self.resolve(dependent, dep.name)
            if self.visibility.readers and not self.visibility.sees(dependent, resolved):
                continue  # as if missing (its spec is Invalid: `hidden`)
            view = self._view(resolved, dep.condition)
            if view is not None:
                out[dep.name] = view
        return out

    def _view(self, name: str, condition: str) -> RunView | None:
        if name in self.views:
            return self.views[name]
        members = self.elements.get(name)
        if not members:
            return None
        return _array_view([self.views[m] for m in members], condition)


def _array_view(runs: Iterable[RunView], condition: str) -> RunView:
    """One run standing for an array's: the first not ended, else the first that ended the
    wrong way, else one that met the condition, ended when the last of them did."""
    met: list[RunView] = []
    for run in runs:
        verdict = satisfies(condition, run.phase)
        if verdict is None or not verdict:
            return run
        met.append(run)
    ends = [r.finished_at for r in met]
    last = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
    return RunView(met[0].phase, last)
