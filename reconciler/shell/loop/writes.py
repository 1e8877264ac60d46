"""How each status of a plan reaches its sidecar: fsynced, written, or left to write later.

Which status needs what is the planner's decision (`Plan.write_classes`, see
reconciler.core.durability). This module adds only what the loop knows: a position-only change
of a task whose spec was just edited is written at once (its new place in the queue is what its
author looks for); every other position-only change is left to the store's write-behind, within
a budget (see `Settings.position_write_seconds`), so a reordered queue does not rewrite
thousands of files in every pass. The rule is documented in docs/reliability.md.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path

from reconciler.core.planner import Plan, WriteClass


@dataclass(frozen=True)
class WriteClasses:
    """Names of the changed statuses of one plan, by how they are written."""

    durable: frozenset[str]  # fsynced before any Ray call that depends on them
    prompt: frozenset[str]  # written this pass, atomically, without fsync
    deferred: frozenset[str]  # left to the store's write-behind


def split(plan: Plan, edited: AbstractSet[str] = frozenset()) -> WriteClasses:
    """The changed statuses of `plan` by how they are written. `edited`: tasks whose spec
    changed since the last pass; their own moves in the queue are written at once; only the
    knock-on moves of the others wait."""
    durable: set[str] = set()
    prompt: set[str] = set()
    deferred: set[str] = set()
    for name, kind in plan.write_classes.items():
        if kind is WriteClass.DURABLE:
            durable.add(name)
        elif kind is WriteClass.POSITION and name not in edited:
            deferred.add(name)
        else:
            prompt.add(name)
    return WriteClasses(frozenset(durable), frozenset(prompt), frozenset(deferred))


# Errors that mean "never writable here" rather than "not now" (a full disk frees up).
_NEVER = {errno.EROFS, errno.EACCES, errno.EPERM}


def _probe(folder: Path) -> None:
    """Create and remove one hidden file in `folder`; raises OSError."""
    fd, name = tempfile.mkstemp(prefix=".rayqueue-probe-", dir=folder)
    os.close(fd)
    os.unlink(name)


def status_location_problem(folder: Path, *, given: bool) -> tuple[bool, str] | None:
    """Whether serve can write sidecars in `folder`, checked once at start: None when it can,
    else (fatal, message). A read-only or forbidden location is fatal (nothing could ever be
    submitted: a run starts only once its record is on disk); a full disk is a warning, as
    serve recovers when space comes back. `given`: the folder came from --status-dir."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _probe(folder)
    except OSError as exc:
        fatal = exc.errno in _NEVER
        hint = (
            "give --status-dir a writable folder"
            if given
            else "give serve a writable --status-dir (sidecars go there, mirroring the folder)"
        )
        return fatal, f"cannot write task statuses in {folder}: {exc.strerror or exc}; {hint}"
    return None
