"""Whether the submission id a status names is the task's own run: one rule, for the planner
that follows runs, the API that serves their logs, and every stop.

A status sidecar is the scheduler's write-ahead record (a run's id is on disk before Ray
hears of it), but it sits in a folder its team can write: it is input, never authority. The
id it names is the task's own only when the scheduler's own record proves it:

- whenever Ray has a job under the id, the metadata our submit gave that job names our queue,
  this task (the element, for an element of an array), its uid and its run; a job that names
  anything else is never this task's, whatever the file says;
- when Ray has no job under it, the id must be the one the status's own fields give the run
  (`submission_ids.for_run`: the task's name, its uid and run number, and the spec's explicit
  id or none). Another task's id is never that: the name is part of a derived id, and an
  explicit id is the spec's own claim (judged by the explicit id claims, not here).

A job Ray lists with our metadata for this run is the task's own even when the spec derives
another id now: an explicit id is no part of the spec hash, so it may change under a run. An
id that is the derived one while Ray's job under it is another's is taken: a conflict of the
spec's explicit id, which the planner records as such (SubmissionIdConflict), not a forgery.
"""

from __future__ import annotations

from enum import Enum

from specs.cluster import META_QUEUE, META_RUN, META_TASK, META_UID, RayJob
from specs.task.status import TaskStatusBody
from specs.task.submission_ids import for_run


class Proof(Enum):
    """What the scheduler's own record says of the submission id a status names. Only OURS
    lets a log be served, a job's state be shown, or a job be stopped as the task's."""

    OURS = "ours"  # Ray has a job under it whose metadata names this very run
    UNLISTED = "unlisted"  # Ray has no job under it, and it is the id our record derives
    TAKEN = "taken"  # the id our record derives, but Ray's job under it is another's
    UNPROVEN = "unproven"  # Ray has no job under it, and our record does not derive it
    NOT_OURS = "notOurs"  # Ray's job under it is another's, and our record does not derive it

    def stands(self, ended: bool) -> bool:
        """Whether the status keeps its record of the run. A derived id stands (a taken one
        is the spec's own doing, recorded as a conflict). An unproven one stands only for a
        run that has `ended`: nothing is followed, served, shown or stopped under an id Ray
        does not list, and the spec's explicit id may have changed since the run; a run not
        ended would be submitted or followed under it, so it does not. An id Ray's job under
        it says is another's never stands: the file's word against ours."""
        if self is Proof.UNPROVEN:
            return ended
        return self is not Proof.NOT_OURS


def names_run(job: RayJob, queue_id: str, task: str, uid: str | None, run: int) -> bool:
    """Whether Ray's `job` is run `run` of `task` (uid `uid`) in queue `queue_id`, by the
    metadata our submit gave it. A job submitted before the uid or the run number were
    recorded in its metadata is judged by the rest."""
    meta = job.metadata
    if meta.get(META_QUEUE) != queue_id or meta.get(META_TASK) != task:
        return False
    job_uid = meta.get(META_UID) or None
    job_run = meta.get(META_RUN)
    return job_uid in (None, uid) and job_run in (None, str(run))


def prove(
    task: str, body: TaskStatusBody, explicit: str | None, job: RayJob | None, queue_id: str
) -> Proof:
    """What our record says of the submission id `body` (the status of `task`) names.
    `explicit`: the spec's explicit submission id (None: it has none, or the spec is not
    known); `job`: Ray's job under that id, None when Ray lists none. The id a task without
    an explicit id derives is its own whatever explicit id the spec names now (the name and
    uid are in it). An empty id proves nothing (NOT_OURS): there is no run to follow, show or
    stop."""
    sid = body.submission_id
    if not sid:
        return Proof.NOT_OURS
    if job is not None and names_run(job, queue_id, task, body.uid, body.run):
        return Proof.OURS
    uid = body.uid
    derived = uid is not None and (
        sid == for_run(task, uid, body.run, explicit)
        or (explicit is not None and sid == for_run(task, uid, body.run, None))
    )
    if job is None:
        return Proof.UNLISTED if derived else Proof.UNPROVEN
    return Proof.TAKEN if derived else Proof.NOT_OURS


__all__ = ["Proof", "names_run", "prove"]
