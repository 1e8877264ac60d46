"""Ray submission ids as names: the rule an explicit `spec.submissionId` must follow, and how
the ids of later runs (`<id>-<run>`) are told apart from other ids.

Ray puts the submission id into URL paths (`/api/jobs/<id>/stop`) and into the driver log's file
name, so an id is a name, never a path: no `/`, `?`, `#`, `%` or spaces. Ids starting with `rq-` are
the ones rayqueue derives itself (`rq-<slug>-<uid>-<run>`); a spec may not claim one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Final

# The longest id a spec may give. Later runs add `-<run>`: even `-100000` keeps Ray's driver log
# file name (`job-driver-<id>.log`) well inside the 255 bytes a file name may have.
MAX_LENGTH: Final = 200
RESERVED_PREFIX: Final = "rq-"
_RULE = re.compile(r"[A-Za-z0-9._-]+")
SCHEMA_PATTERN: Final = r"^(?!rq-)(?!\.{1,2}$)[A-Za-z0-9._-]+$"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_RUN_SUFFIX = re.compile(r"-[0-9]+")
_TRAILING_RUN = re.compile(r"-[0-9]+$")


def problem(value: str) -> str | None:
    """Why `value` may not be an explicit submission id, or None if it may."""
    if not value:
        return "must not be empty"
    if len(value) > MAX_LENGTH:
        return f"is {len(value)} characters long; at most {MAX_LENGTH}"
    if not _RULE.fullmatch(value):
        return "may hold only letters, digits, '.', '_' and '-' (it becomes part of Ray URLs)"
    if value in (".", ".."):
        return "must not be '.' or '..'"
    if value.startswith(RESERVED_PREFIX):
        return f"must not start with {RESERVED_PREFIX!r}: those ids are the ones rayqueue derives"
    return None


def unsubmittable(value: str) -> str | None:
    """Why Ray must not be handed `value` as a submission id at all, or None. Ray stores the job and
    then builds its driver log's file name from the id: a `/` leaves the job PENDING for good. Ids
    outside the rule (a legacy API id with spaces, say) are still submitted (and stopped,
    encoded)."""
    if value in ("", ".", ".."):
        return f"submission id {value!r} is not a name"
    if any(c in value for c in "/\\") or not value.isprintable():
        return f"submission id {value!r} holds '/', '\\' or a control character"
    return None


def cleaned(value: str) -> str:
    """`value` with every run of characters outside the rule replaced by `-`, cut to the
    length limit (keeping the end, where the legacy API's ids hold their uuid)."""
    text = _UNSAFE.sub("-", value).strip("-.") or "task"
    if len(text) > MAX_LENGTH:
        text = text[: MAX_LENGTH - 37] + "-" + text[-36:]
    return text


def bases(recorded: str) -> tuple[str, ...]:
    """The explicit ids a run recorded under `recorded` may have been started with: the id
    itself (a first run), and the id without a `-<run>` suffix (a later run)."""
    found = _TRAILING_RUN.search(recorded)
    return (recorded, recorded[: found.start()]) if found and found.start() else (recorded,)


def users(wanted: AbstractSet[str], recorded: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """For each explicit id in `wanted`, the owners (task names) whose recorded id, given as
    (owner, recorded id) pairs, is a run of it."""
    found: dict[str, set[str]] = {}
    for owner, sid in recorded:
        for base in bases(sid):
            if base in wanted:
                found.setdefault(base, set()).add(owner)
    return found


def for_run(name: str, uid: str, run: int, explicit: str | None) -> str:
    """The submission id of run `run` of task `name` (uid `uid`): deterministic from what the
    task's status records, and unique over the cluster's history (the uid is new for each task
    that is created anew). With an explicit id, the first run's is that id, later ones add
    `-<run>`."""
    if explicit:
        return explicit if run == 1 else f"{explicit}-{run}"
    slug = _UNSAFE.sub("-", name.replace("/", ".")).strip("-.")[:80] or "task"
    return f"{RESERVED_PREFIX}{slug}-{uid}-{run}"


def uses(recorded: str, explicit: str) -> bool:
    """Whether a run recorded under `recorded` ran with the explicit id `explicit`: its first
    run (`explicit` itself) or a later one (`explicit-<run>`)."""
    if recorded == explicit:
        return True
    if not recorded.startswith(explicit):
        return False
    return bool(_RUN_SUFFIX.fullmatch(recorded, len(explicit)))


@dataclass(frozen=True)
class SeenClaim:
    """When the scheduler first saw a task's spec claim the explicit id `sid` (`at`, seconds
    since the epoch): the loop's own record, kept in its state folder, never in a file a team
    can write. Between two folders, the claim seen first keeps the id."""

    sid: str
    at: float


__all__ = [
    "MAX_LENGTH",
    "RESERVED_PREFIX",
    "SCHEMA_PATTERN",
    "SeenClaim",
    "bases",
    "cleaned",
    "for_run",
    "problem",
    "unsubmittable",
    "users",
    "uses",
]
