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
  id). Another task's id is never that: the name is part of a derived id, and an explicit id
  is the spec's own claim (judged by the explicit id claims, not here).

A job Ray lists with our metadata for this run is the task's own even when the spec derives
another id now: its explicit id may have changed since the run was submitted. An id that is
the derived one while Ray's job under it is another's is taken: a conflict of the spec's
explicit id, which the planner records as such (SubmissionIdConflict), not a forgery.
"""

from __future__ import annotations

from enum import Enum

from specs.cluster import META_QUEUE, META_RUN, META_TASK, META_UID, RayJob
from specs.task.status import TaskStatusBody
from specs.task.submission_ids import for_run


class Proof(Enum):
    """What the scheduler's own record says of the submission id a status names."""

    OURS = "ours"  # Ray has a job under it whose metadata names this very run
    UNLISTED = "unlisted"  # Ray has no job under it, and it is the id our record derives
    TAKEN = "taken"  # the id our record derives, but Ray's job under it is another's
    NOT_OURS = "notOurs"  # neither: only the file says so, and it is not believed

    @property
    def believed(self) -> bool:
        """The status's record of its run stands (even a taken id is the spec's own doing);
        only NOT_OURS is a file's word against ours."""
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
    known); `job`: Ray's job under that id, None when Ray lists none. An empty id proves
    nothing (NOT_OURS): there is no run to follow, show or stop."""
    sid = body.submission_id
    if not sid:
        return Proof.NOT_OURS
    if job is not None and names_run(job, queue_id, task, body.uid, body.run):
        return Proof.OURS
    uid = body.uid
    if uid is None or sid != for_run(task, uid, body.run, explicit):
        return Proof.NOT_OURS
    return Proof.UNLISTED if job is None else Proof.TAKEN


__all__ = ["Proof", "names_run", "prove"]
