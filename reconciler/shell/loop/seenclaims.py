"""When this scheduler first saw each task claim its explicit submission id: its own record,
kept in its state folder (no team writes there), never in a file of the tasks folder. Between
two folders' claims of one id, the planner lets the claim seen first keep it
(reconciler/core/task/idclaims.py); a spec or a sidecar a team commits later cannot make its
claim older.

A task keeps its record while its spec (or, while the file is broken, its last valid spec)
names the same id; a renamed id is seen anew, a deleted task forgets its record.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from specs.folder.atomic import write_atomic
from specs.task.inputs import TaskInput
from specs.task.submission_ids import SeenClaim

log = logging.getLogger("rayqueue.loop")

FILE_NAME = "id_claims.json"


def claimed_id(spec: TaskInput | None) -> str | None:
    """The explicit id `spec` claims, by its last valid spec while its file is broken (a team's
    typo must not hand its id to a later claimant)."""
    if spec is None:
        return None
    task = spec.task or spec.last_valid
    return (task.spec.submission_id or None) if task is not None else None


class SeenClaims:
    """The record, in memory and in `path` (None: in memory only)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._seen: dict[str, SeenClaim] = _load(path) if path is not None else {}
        self._handed: Mapping[str, SeenClaim] = dict(self._seen)
        self.stale = True  # the next update looks at every task (a new loop, a failed pass)

    def update(
        self, specs: Mapping[str, TaskInput], names: Collection[str], at: float
    ) -> Mapping[str, SeenClaim]:
        """The record after a pass that read `specs`, whose spec inputs `names` changed (every
        task when the record is stale), at `at`. The same mapping while nothing changed."""
        looked_at = specs.keys() | self._seen.keys() if self.stale else names
        self.stale = False
        changed = False
        for name in looked_at:
            sid = claimed_id(specs.get(name))
            record = self._seen.get(name)
            if sid is None:
                if record is not None:
                    del self._seen[name]
                    changed = True
            elif record is None or record.sid != sid:
                self._seen[name] = SeenClaim(sid, at)
                changed = True
        if changed:
            self._handed = dict(self._seen)
            self._save()
        return self._handed

    def _save(self) -> None:
        if self.path is None:
            return
        document = {name: {"sid": r.sid, "at": r.at} for name, r in sorted(self._seen.items())}
        try:
            write_atomic(self.path, json.dumps(document, indent=0).encode())
        except OSError as exc:
            # Kept in memory: only a restart before the next good write forgets a claim's age.
            log.warning("cannot write %s: %s", self.path, exc)


def _load(path: Path) -> dict[str, SeenClaim]:
    try:
        document: Any = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("cannot read %s (%s); explicit ids' claims are seen anew", path, exc)
        return {}
    seen: dict[str, SeenClaim] = {}
    if isinstance(document, dict):
        for name, record in document.items():
            if isinstance(record, dict):
                sid, at = record.get("sid"), record.get("at")
                if isinstance(sid, str) and isinstance(at, int | float):
                    seen[str(name)] = SeenClaim(sid, float(at))
    return seen
