"""Querying tasks: label selectors (Kubernetes' equality-based ones) and phase lists, and the
views that match them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from specs.service.errors import QueryError
from specs.service.views import TaskView
from specs.task.models import Phase

_LABEL_KEY = re.compile(r"[A-Za-z0-9._/-]+")


@dataclass(frozen=True)
class Requirement:
    """One term of a label selector."""

    key: str
    op: str  # "=", "!=", "exists", "!exists"
    value: str = ""

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op == "=":
            return labels.get(self.key) == self.value
        return labels.get(self.key) != self.value


def parse_selector(texts: str | Sequence[str]) -> list[Requirement]:
    """Kubernetes' equality-based selectors: `a=b,c!=d,e,!f` (`==` is `=`); comma-separated
    or several texts."""
    result = []
    for text in [texts] if isinstance(texts, str) else texts:
        for term in (t.strip() for t in text.split(",")):
            if not term:
                continue
            if "!=" in term:
                key, value = term.split("!=", 1)
                req = Requirement(key.strip(), "!=", value.strip())
            elif "=" in term:
                key, value = term.split("==", 1) if "==" in term else term.split("=", 1)
                req = Requirement(key.strip(), "=", value.strip())
            elif term.startswith("!"):
                req = Requirement(term[1:].strip(), "!exists")
            else:
                req = Requirement(term, "exists")
            if not _LABEL_KEY.fullmatch(req.key):
                raise QueryError(f"invalid label selector term {term!r}")
            result.append(req)
    return result


def parse_phases(texts: str | Sequence[str]) -> set[str]:
    """Phase names, comma-separated or several texts, case-insensitive."""
    known = {p.value.lower(): p.value for p in Phase}
    phases = set()
    for text in [texts] if isinstance(texts, str) else texts:
        for raw in (t.strip() for t in text.split(",")):
            if not raw:
                continue
            if raw.lower() not in known:
                valid = ", ".join(p.value for p in Phase)
                raise QueryError(f"unknown phase {raw!r}; one of: {valid}")
            phases.add(known[raw.lower()])
    return phases


def select(
    views: Iterable[TaskView],
    selector: Sequence[Requirement] = (),
    phases: Iterable[str] = (),
    *,
    labels: Callable[[TaskView], Mapping[str, str]] = lambda v: v.labels,
) -> list[TaskView]:
    """The views whose labels match every requirement and whose phase is one of `phases`
    (no phases: any)."""
    wanted = set(phases)
    return [
        v
        for v in views
        if all(r.matches(labels(v)) for r in selector) and (not wanted or v.phase in wanted)
    ]
