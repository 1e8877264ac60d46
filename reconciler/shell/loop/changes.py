"""What changed since the last pass, as versions: the one record of change in the loop.

Each task's Version is made of the store's generations (an unchanged file keeps its own), kept
between passes and rebuilt only for the names a pass read anew; the names whose version may
differ from the pass before go to the planner (`changed`), which keeps what changed since it
last planned and tells a pass that only reads back its own writes (incremental.Stand); and
the versions of the last pass that wrote statuses tell an edited spec (`edited`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import NamedTuple

from specs.task.inputs import TaskInput


class Version(NamedTuple):
    """What one task's inputs are made of, as generations: equal versions, equal inputs."""

    spec: int  # the store's generation of the spec entry
    source: int  # of the git revision answer its source was taken from (0: git not asked)
    status: int  # the store's generation of its status (0: none)


class Changes:
    """The versions, kept between passes; the names of this pass's read whose version may
    differ from the pass before (`changed`; None: not known, the versions were built anew);
    and the versions the last pass that wrote statuses planned from."""

    def __init__(self) -> None:
        self.versions: dict[str, Version] = {}
        self.changed: set[str] | None = None
        self.full = True  # this pass's versions were all built anew
        self._built_of: tuple[int, bool] | None = None  # (source version, unrecorded)
        self._written: Mapping[str, Version] = {}

    def lost(self) -> None:
        """A pass failed after reading: what it read may be in the store's records and not in
        these versions, so the next read builds them all anew."""
        self._built_of = None

    def read(
        self,
        specs: Mapping[str, TaskInput],
        statuses: Mapping[str, int],
        spec_changes: AbstractSet[str],
        status_changes: AbstractSet[str] | None,
        source: int,
        unrecorded: bool,
    ) -> dict[str, Version]:
        """Each task's Version after a read: only the tasks whose spec or status it read
        anew are looked at, unless the store could not say (a full read of the sidecars),
        git's answer changed (`source`), or remembered first statuses stand in for sidecars."""
        kept = before = self.versions
        names: AbstractSet[str]
        if status_changes is None or unrecorded or self._built_of != (source, False):
            self.full = True
            self.changed = None
            before = dict(kept)  # an equal version is kept: the plan's Kept holds it too
            kept.clear()
            names = specs.keys()
        else:
            self.full = False
            self.changed = names = set(spec_changes)
            names |= status_changes
        self._built_of = (source, unrecorded)
        for name in names:
            if name in specs:
                version = Version(specs[name].generation, source, statuses.get(name, 0))
                old = before.get(name)
                kept[name] = old if old == version and old is not None else version
            else:
                kept.pop(name, None)
        return dict(kept)

    def edited(self, versions: Mapping[str, Version], spec_changes: AbstractSet[str]) -> set[str]:
        """The tasks whose spec (or its source) has a new version since the last pass that
        wrote statuses, which this one does: a spec has one only if this pass read it anew,
        or all sources changed with git's answer, so only those are compared."""
        last = self._written
        maybe = spec_changes if not self.full else versions.keys()
        edited = {
            n for n in maybe if n in last and n in versions and last[n][:2] != versions[n][:2]
        }
        self._written = versions
        return edited
