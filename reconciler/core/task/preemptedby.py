"""Who preempted a victim, as its status records it (`preemptedBy`) and as the planner reads it
back.

The victim's status lies in the victim's folder and is read by whoever reads the victim, so it
may name its preemptor only where the victim's folder may see it (specs.task.visibility).
Otherwise it holds a reference: ANOTHER_FOLDER and a digest of the preemptor's uid and run and
the victim's name. The victim's team cannot read the preemptor's uid, so the reference names
nobody to it, and it cannot make one up for a task of another folder.

The status is also a file that team may write, so what it records is input: `Preemptors` trusts
a name only where the victim may see that task (the planner never records another), and a
reference only where it is the digest of a task that waits as a preemptor (its own status says
Preempting) in a folder the victim may not see, computed for this very victim. Anything else
names no preemptor: the victim still waits for its own stopped run, and no other task is made
to wait for it, nor given its room. Every pass, full and fast, reads it through `Preemptors`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Final

from reconciler.core.task.states import State, state_of
from specs.task.status import TaskStatusBody
from specs.task.visibility import ANOTHER_FOLDER, Visibility

__all__ = ["NO_PREEMPTOR", "Preemptors", "record", "reference", "shown"]

# What a victim's stopped run waits for when its status names no preemptor the planner
# trusts: a key that is no task's name (task names hold no space), so it waits for nobody.
NO_PREEMPTOR: Final = "(no preemptor)"

_PREFIX: Final = f"{ANOTHER_FOLDER} ("


def reference(victim: str, preemptor: TaskStatusBody) -> str:
    """What `victim`'s status records for a preemptor of a folder it may not see."""
    text = f"{preemptor.uid or ''}\n{preemptor.run}\n{victim}"
    return f"{_PREFIX}{hashlib.sha256(text.encode()).hexdigest()[:16]})"


def record(visibility: Visibility, victim: str, preemptor: str, body: TaskStatusBody) -> str:
    """What `victim`'s status records as its preemptor (`preemptor`, whose status is `body`):
    its name where the victim's folder may see it, else a reference."""
    if visibility.sees(victim, preemptor):
        return preemptor
    return reference(victim, body)


def shown(visibility: Visibility, victim: str, recorded: str) -> str:
    """How `victim`'s status and the log's stop line call the preemptor it records: a name
    the victim may see, else ANOTHER_FOLDER (never a name its file could smuggle in)."""
    if not recorded.startswith(_PREFIX) and visibility.sees(victim, recorded):
        return recorded
    return ANOTHER_FOLDER


class Preemptors:
    """Reads back which task preempted a victim. `waiting`: the tasks that may be a preemptor
    a reference names, with their statuses (any superset of those whose status says
    Preempting); read once, and only if some victim holds a reference."""

    def __init__(
        self,
        visibility: Visibility,
        waiting: Callable[[], Iterable[tuple[str, TaskStatusBody]]],
    ) -> None:
        self._visibility = visibility
        self._waiting = waiting
        self._preempting: list[tuple[str, TaskStatusBody]] | None = None

    def of(self, victim: str, body: TaskStatusBody) -> str | None:
        """The task that preempted `victim` (whose status is `body`), or None if its status
        names none the planner trusts."""
        recorded = body.preempted_by
        if recorded is None:
            return None
        if not recorded.startswith(_PREFIX):
            return recorded if self._visibility.sees(victim, recorded) else None
        if self._preempting is None:
            self._preempting = [
                (name, preemptor)
                for name, preemptor in self._waiting()
                if state_of(preemptor) is State.PREEMPTING
            ]
        for name, preemptor in self._preempting:
            if not self._visibility.sees(victim, name) and reference(victim, preemptor) == recorded:
                return name
        return None

    def key_of(self, victim: str, body: TaskStatusBody) -> str:
        """`of`, with NO_PREEMPTOR for none: what the victim's stopped run is stopping for."""
        return self.of(victim, body) or NO_PREEMPTOR
