"""Id squatting through the API: an explicit spec.submissionId that another task
has, or claims, is refused with 409 before anything is written.

"Has" means what the loop would also see: another spec naming it, another task's sidecar
recording a run under it (also `<id>-<run>`), or a Ray job holding it that is not this
task's (as the loop last listed them). The other task is named only to a caller that may
write it; anyone else learns only that the id is taken.
"""

from __future__ import annotations

from api.errors import ApiError
from api.ports import Loop
from specs.service.tasks import Check, IdUser, TaskService
from specs.task.records import Task
from specs.tenancy.access import Principal


def id_check(service: TaskService, caller: Principal, loop: Loop | None, queue_id: str) -> Check:
    """The check TaskService runs on a spec just before writing it."""

    def check(name: str, task: Task, before: Task | None) -> None:
        sid = task.spec.submission_id
        if not sid:
            return
        if before is not None and before.spec.submission_id == sid:
            return  # not a new claim: other edits of a task keep working as they did
        jobs = loop.state.jobs if loop is not None else None
        user = service.submission_id_user(name, sid, jobs, queue_id)
        if user is not None:
            raise ApiError(409, _message(sid, user, caller))

    return check


def _message(sid: str, user: IdUser, caller: Principal) -> str:
    if user.task is None:
        holder = "a Ray job that is not this queue's"
    elif caller.can_write(user.task):
        holder = f"task {user.task}"
    else:
        holder = "another task"
    return f"spec.submissionId {sid!r} is already used by {holder}; choose another id"


__all__ = ["id_check"]
