"""A task array as listings show it: one row for all its elements, with its progress
(`7/12 done, 4 running, 1 failed`). The elements themselves are ordinary TaskViews."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specs.service.views import NOT_SEEN, TaskView
from specs.task.arrays import split
from specs.task.models import Phase
from specs.task.status import TaskStatus

_FAILED = (Phase.FAILED.value, Phase.TIMED_OUT.value, Phase.LOST.value)
_ACTIVE = (Phase.STARTING.value, Phase.RUNNING.value)


@dataclass(frozen=True)
class ArrayView:
    """An array and its elements (in index order)."""

    name: str
    elements: tuple[TaskView, ...]

    @property
    def counts(self) -> Counter[str]:
        return Counter(e.phase for e in self.elements)

    @property
    def progress(self) -> str:
        return progress(self.counts, len(self.elements))

    @property
    def phase(self) -> str:
        return overall_phase(self.counts)

    @property
    def first(self) -> TaskView:
        return self.elements[0]


def progress(counts: Counter[str], size: int) -> str:
    """`7/12 done, 4 running, 1 failed`: elements by phase, as words."""
    parts = [f"{counts[Phase.SUCCEEDED.value]}/{size} done"]
    shown = {
        "running": sum(counts[p] for p in _ACTIVE),
        "queued": counts[Phase.QUEUED.value],
        "failed": sum(counts[p] for p in _FAILED),
    }
    for phase in (Phase.SUSPENDED, Phase.STOPPED, Phase.UNSCHEDULABLE, Phase.INVALID):
        shown[phase.value.lower()] = counts[phase.value]
    shown["not seen"] = counts[NOT_SEEN] + max(size - sum(counts.values()), 0)
    parts += [f"{n} {word}" for word, n in shown.items() if n]
    return ", ".join(parts)


def overall_phase(counts: Counter[str]) -> str:
    """Running while any element is active; else Queued while any waits; else the one phase
    they all share, or Failed when some failed, or Mixed."""
    if any(counts[p] for p in _ACTIVE):
        return Phase.RUNNING.value
    if counts[Phase.QUEUED.value]:
        return Phase.QUEUED.value
    if len(counts) == 1:
        return next(iter(counts))
    if any(counts[p] for p in _FAILED):
        return Phase.FAILED.value
    return "Mixed" if counts else NOT_SEEN


def array_status(elements: Mapping[int, TaskStatus], size: int) -> dict[str, Any]:
    """The `status` of an array in the HTTP API: its phase, progress, counts and failures."""
    counts = Counter(s.status.phase.value for s in elements.values())
    return {
        "phase": overall_phase(counts),
        "progress": progress(counts, size),
        "size": size,
        "counts": dict(sorted(counts.items())),
        "failed": [
            {
                "index": index,
                "phase": elements[index].status.phase.value,
                "exitCode": elements[index].status.exit_code,
                "logTail": elements[index].status.log_tail,
            }
            for index in sorted(elements)
            if elements[index].status.phase.value in _FAILED
        ],
    }


def group(views: Iterable[TaskView]) -> list[TaskView | ArrayView]:
    """The views with each array's elements folded into one ArrayView, placed where its first
    element comes in the listing."""
    members: dict[str, list[TaskView]] = {}
    order: list[TaskView | str] = []
    for view in views:
        parts = split(view.name)
        if parts is None:
            order.append(view)
            continue
        if parts[0] not in members:
            members[parts[0]] = []
            order.append(parts[0])
        members[parts[0]].append(view)
    out: list[TaskView | ArrayView] = []
    for item in order:
        if isinstance(item, str):
            elements = sorted(members[item], key=lambda v: split(v.name) or ("", 0))
            out.append(ArrayView(item, tuple(elements)))
        else:
            out.append(item)
    return out


def elements_of(views: Sequence[TaskView], array: str) -> list[TaskView]:
    """The elements of `array`, in index order."""
    found = [v for v in views if (p := split(v.name)) is not None and p[0] == array]
    return sorted(found, key=lambda v: split(v.name) or ("", 0))
