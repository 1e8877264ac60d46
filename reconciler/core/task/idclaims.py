"""Explicit submission ids as claims: one id, one task. Pure, like the planner that calls it.

An id is used by a task once its sidecar records a run under it (the id, or `<id>-<run>`),
or a job of this queue that belongs to the task holds it. When two or more specs ask for the
same id, the task that has used it keeps it and every other claimant is Invalid; when none
has, all are Invalid until one is renamed (whichever came first is not something a full
read of the folder can tell). A task that already runs is never stopped by this: its run goes
on under a SpecInvalid condition, as under a broken file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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
            (name, status.status.submission_id)
            for name, status in statuses.items()
            # A run refused as SubmissionIdConflict never ran under the id it recorded.
            if status.status.submission_id and status.status.reason != Reason.SUBMISSION_ID_CONFLICT
        ),
    )
    held = submission_ids.users(
        wanted, ((job.metadata.get(META_TASK, ""), sid) for sid, job in ours.items())
    )
    result: dict[str, str] = {}
    for sid, names in claims.items():
        holders = held.get(sid, set()) - {""}
        users = ran.get(sid, set()) | holders
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
