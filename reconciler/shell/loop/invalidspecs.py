"""Says in serve's log what the user broke: one WARNING when a spec file becomes invalid (its
file, line, field and message, as `rayqueue validate` prints them), once per version of the
file, and again only when it changes and is still invalid; an INFO when it is valid again.

Only the names a pass read anew are looked at, so an unchanged folder costs nothing here; a
file still being written is not read anew until it settles (specs/folder/changes.py), so a
half-written file is never reported.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from specs.task.inputs import TaskInput

log = logging.getLogger("rayqueue.specs")


class InvalidSpecs:
    """The version of each invalid spec file already reported: its bytes' hash, or the error
    itself for a file too large to hash."""

    def __init__(self) -> None:
        self._reported: dict[str, str] = {}

    def note(self, inputs: Mapping[str, TaskInput], names: Iterable[str]) -> None:
        """Report the invalid files among `names` (the ones read anew) not yet reported in
        this version, and the reported ones now valid or gone."""
        for name in names:
            entry = inputs.get(name)
            if entry is None:
                self._reported.pop(name, None)
                continue
            if entry.error is None:
                if self._reported.pop(name, None) is not None:
                    log.info("task %s: its spec is valid again", name)
                continue
            version = entry.raw_hash or str(entry.error)
            if self._reported.get(name) == version:
                continue
            self._reported[name] = version
            kept = " (its running job keeps its last valid spec)" if entry.last_valid else ""
            log.warning("task %s: invalid spec%s: %s", name, kept, entry.error)
