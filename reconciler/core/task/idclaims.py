"""Explicit submission ids as claims: one id, one task. Pure, like the planner that calls it.

An id is used by a task once its sidecar records a run under it (the id, or `<id>-<run>`),
or a job of this queue that belongs to the task holds it. When two or more specs ask for the
same id, the task that has used it keeps it and every other claimant is Invalid; when none
has, all are Invalid until one is renamed (whichever came first is not something a full
read of the folder can tell). A task that already runs is never stopped by this: its run goes
on under a SpecInvalid condition, as under a broken file.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from collections.abc import Set as AbstractSet

from specs.cluster import META_TASK, RayJob
from specs.task import submission_ids
from specs.task.models import Reason
from specs.task.status import TaskStatus


def conflicts(
    claimed: Iterable[tuple[str, str]],
    statuses: Mapping[str, TaskStatus],
    ours: Mapping[str, RayJob],
) -> dict[str, str]:
    """By task name: why its spec may not use the submission id it names (a message naming
    the field and the task that has the id). `claimed`: (task, explicit id) for each spec
    that names one; `ours`: this queue's jobs by submission id."""
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
        result.update(refusals(sid, names, ran.get(sid, set()), held.get(sid, set())))
    return result


def run_id(status: TaskStatus) -> str | None:
    """The submission id a status records a run under, None if none (a run refused as
    SubmissionIdConflict never ran under the id it recorded)."""
    body = status.status
    sid = body.submission_id
    return sid if sid and body.reason != Reason.SUBMISSION_ID_CONFLICT else None


def refusals(
    sid: str, names: Collection[str], ran: AbstractSet[str], holders: AbstractSet[str]
) -> dict[str, str]:
    """By task name: why the claimants `names` of the explicit id `sid` may not use it.
    `ran`: the tasks whose status records a run of it; `holders`: the tasks (META_TASK, ""
    when a job names none) whose job of ours holds a run of it."""
    holders = holders - {""}
    users = ran | holders
    result: dict[str, str] = {}
    if users:
        # The task whose job holds the id, then a claimant, then by name: deterministic.
        keeper = min(users, key=lambda n: (n not in holders, n not in names, n))
        for name in names:
            if name != keeper:
                result[name] = (
                    f"spec.submissionId: {sid!r} is already used by task {keeper}; "
                    "choose another id"
                )
    elif len(names) > 1:
        for name in names:
            others = ", ".join(sorted(n for n in names if n != name))
            result[name] = (
                f"spec.submissionId: {sid!r} is claimed by task {others} as well and none "
                "has run with it yet; rename all but one"
            )
    return result
