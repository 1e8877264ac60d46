"""Explicit submission ids as claims: one id, one task. Pure, like the planner that calls it.

An id is held by a task when a job of this queue names that task (Ray's job metadata, the
scheduler's own record): that task keeps it, whatever folder its claimants are in. Without
such a job, the claims of one folder are judged by its files: the task whose sidecar records
a run under the id (the id, or `<id>-<run>`) keeps it; when none has, all are Invalid until
one is renamed. A sidecar is a file its team writes, so it decides nothing between folders:
there the claim the scheduler saw first keeps the id (the loop's record of when it first saw
each claim), and every later claimant is Invalid with a message that names no other folder's
task. A task that already runs is never stopped by this: its run goes on under a SpecInvalid
condition, as under a broken file.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from specs.cluster import META_TASK, RayJob
from specs.task import submission_ids
from specs.task.models import Reason
from specs.task.status import TaskStatus
from specs.task.submission_ids import SeenClaim
from specs.task.visibility import EVERYTHING, Visibility


@dataclass(frozen=True)
class Folders:
    """What decides between the claims of two folders, besides their files: which task is of
    which folder (`visibility`, from the team tokens), and when the scheduler first saw each
    task claim its id (`seen`, the loop's own record, by task)."""

    visibility: Visibility = EVERYTHING
    seen: Mapping[str, SeenClaim] = field(default_factory=dict)

    def seen_at(self, name: str, sid: str) -> float:
        """When the scheduler first saw `name` claim `sid`; INFINITY if it has no record."""
        record = self.seen.get(name)
        return record.at if record is not None and record.sid == sid else INFINITY


ONE_FOLDER = Folders()
INFINITY = float("inf")


def conflicts(
    claimed: Iterable[tuple[str, str]],
    statuses: Mapping[str, TaskStatus],
    ours: Mapping[str, RayJob],
    folders: Folders = ONE_FOLDER,
) -> dict[str, str]:
    """By task name: why its spec may not use the submission id it names (a message naming
    the field, and the task that has the id where the claimant may see it). `claimed`:
    (task, explicit id) for each spec that names one; `ours`: this queue's jobs by submission
    id."""
    claims: dict[str, list[str]] = {}
    for name, sid in claimed:
        claims.setdefault(sid, []).append(name)
    if not claims:
        return {}
    wanted = claims.keys()
    ran = submission_ids.users(
        wanted,
        (
            (name, recorded)
            for name, status in statuses.items()
            if (recorded := run_id(status)) is not None
        ),
    )
    held = submission_ids.users(
        wanted, ((job.metadata.get(META_TASK, ""), sid) for sid, job in ours.items())
    )
    result: dict[str, str] = {}
    for sid, names in claims.items():
        result.update(refusals(sid, names, ran.get(sid, set()), held.get(sid, set()), folders))
    return result


def run_id(status: TaskStatus) -> str | None:
    """The submission id a status records a run under, None if none (a run refused as
    SubmissionIdConflict never ran under the id it recorded)."""
    body = status.status
    sid = body.submission_id
    return sid if sid and body.reason != Reason.SUBMISSION_ID_CONFLICT else None


def refusals(
    sid: str,
    names: Collection[str],
    ran: AbstractSet[str],
    holders: AbstractSet[str],
    folders: Folders = ONE_FOLDER,
) -> dict[str, str]:
    """By task name: why the claimants `names` of the explicit id `sid` may not use it.
    `ran`: the tasks whose status records a run of it; `holders`: the tasks (META_TASK, ""
    when a job names none) whose job of ours holds a run of it; `folders`: which task is of
    which folder, and when the scheduler first saw each claim."""
    holders = holders - {""}
    if holders:
        # The task whose job holds the id, a claimant first, then by name: deterministic.
        keeper = min(holders, key=lambda n: (n not in names, n))
        return {n: _used(sid, n, keeper, folders.visibility) for n in names if n != keeper}
    groups = _by_folder(names, ran, folders.visibility)
    if len(groups) == 1:
        return _within_folder(sid, groups[0].claimants, groups[0].ran)
    # A status file is the team's to write: across folders it proves nothing, and the claim
    # the scheduler saw first keeps the id. Seen at once (or never), none keeps it.
    firsts = [min(folders.seen_at(n, sid) for n in group.claimants) for group in groups]
    first = min(firsts)
    winners = [i for i, at in enumerate(firsts) if at == first]
    result: dict[str, str] = {}
    for index, group in enumerate(groups):
        if winners == [index] and first != INFINITY:
            result.update(_within_folder(sid, group.claimants, group.ran))
        else:
            result.update((n, _in_use(sid)) for n in group.claimants)
    return result


@dataclass(frozen=True)
class _FolderClaims:
    """The claimants of an id in one folder, and the tasks of that folder whose status
    records a run of it."""

    claimants: list[str]
    ran: set[str] = field(default_factory=set)


def _by_folder(
    names: Collection[str], ran: AbstractSet[str], visibility: Visibility
) -> list[_FolderClaims]:
    """The claims of an id by folder, in the order of their first claimant by name."""
    groups: list[_FolderClaims] = []
    for name in sorted(names):
        group = next((g for g in groups if visibility.same_folder(name, g.claimants[0])), None)
        if group is None:
            groups.append(_FolderClaims([name]))
        else:
            group.claimants.append(name)
    for user in ran:
        group = next((g for g in groups if visibility.same_folder(user, g.claimants[0])), None)
        if group is not None:
            group.ran.add(user)
    return groups


def _within_folder(sid: str, names: Collection[str], ran: AbstractSet[str]) -> dict[str, str]:
    """Between the claimants of one folder: the task whose status records a run of the id
    keeps it (a claimant first, then by name); when none has, all are refused."""
    result: dict[str, str] = {}
    if ran:
        keeper = min(ran, key=lambda n: (n not in names, n))
        for name in names:
            if name != keeper:
                result[name] = _used_by(sid, keeper)
    elif len(names) > 1:
        for name in names:
            others = ", ".join(sorted(n for n in names if n != name))
            result[name] = (
                f"spec.submissionId: {sid!r} is claimed by task {others} as well and none "
                "has run with it yet; rename all but one"
            )
    return result


def _used(sid: str, name: str, keeper: str, visibility: Visibility) -> str:
    """Why `name` may not use `sid`, which `keeper` holds: `keeper` named only within one
    folder, where `name`'s folder may see it."""
    if visibility.same_folder(name, keeper) and visibility.sees(name, keeper):
        return _used_by(sid, keeper)
    return _in_use(sid)


def _used_by(sid: str, keeper: str) -> str:
    return f"spec.submissionId: {sid!r} is already used by task {keeper}; choose another id"


def _in_use(sid: str) -> str:
    return f"spec.submissionId: {sid!r} is already in use; choose another id"
