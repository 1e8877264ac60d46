"""The one rule for whether the submission id a status names is the task's own run: Ray's job
metadata when Ray has the job, else the id our record derives; never the file's word alone."""

from __future__ import annotations

import pytest

from specs.cluster import META_QUEUE, META_RUN, META_TASK, META_UID, RUNNING, RayJob
from specs.task.models import Phase
from specs.task.ownership import Proof, names_run, prove
from specs.task.status import TaskStatusBody
from specs.task.submission_ids import for_run

QUEUE = "q1"
NAME = "team-a/peek"
UID = "1a2b3c4d"
MINE = for_run(NAME, UID, 1, None)  # rq-team-a.peek-1a2b3c4d-1


def _body(sid: str | None, uid: str | None = UID, run: int = 1) -> TaskStatusBody:
    return TaskStatusBody(phase=Phase.RUNNING, uid=uid, run=run, submission_id=sid)


def _job(sid: str, **metadata: str) -> RayJob:
    meta = {META_QUEUE: QUEUE, META_TASK: NAME, META_UID: UID, META_RUN: "1"} | metadata
    return RayJob(sid, RUNNING, metadata={k: v for k, v in meta.items() if v != "-"})


def test_the_derived_id_is_the_run_id_of_the_task() -> None:
    assert MINE == "rq-team-a.peek-1a2b3c4d-1"
    assert for_run(NAME, UID, 2, None) == "rq-team-a.peek-1a2b3c4d-2"
    assert for_run(NAME, UID, 1, "train") == "train"
    assert for_run(NAME, UID, 3, "train") == "train-3"


@pytest.mark.parametrize(
    ("body", "explicit", "job", "proof"),
    [
        # Ray's job names this run: ours.
        (_body(MINE), None, _job(MINE), Proof.OURS),
        # ... even when the spec's explicit id changed since it was submitted.
        (_body("old-id"), "new-id", _job("old-id"), Proof.OURS),
        # ... and a job submitted before the uid and run were in its metadata.
        (_body(MINE), None, _job(MINE, **{META_UID: "-", META_RUN: "-"}), Proof.OURS),
        # The write-ahead id of a run not submitted yet (or a job Ray forgot): unlisted.
        (_body(MINE), None, None, Proof.UNLISTED),
        (_body("train-2", run=2), "train", None, Proof.UNLISTED),
        # Our derived id, held by another task's job: the explicit id is taken.
        (_body("train"), "train", _job("train", **{META_TASK: "team-b/x"}), Proof.TAKEN),
        (_body("train"), "train", _job("train", **{META_QUEUE: "-"}), Proof.TAKEN),
        # A file naming another team's run, listed or not: never ours.
        (
            _body("rq-team-b.secret-9f9f9f9f-1"),
            None,
            _job("rq-team-b.secret-9f9f9f9f-1", **{META_TASK: "team-b/secret"}),
            Proof.NOT_OURS,
        ),
        (_body("rq-team-b.secret-9f9f9f9f-1"), None, None, Proof.UNPROVEN),
        # ... with the other run's uid copied from its id into the file: still not ours.
        (
            _body("rq-team-b.secret-9f9f9f9f-1", uid="9f9f9f9f"),
            None,
            _job(
                "rq-team-b.secret-9f9f9f9f-1", **{META_TASK: "team-b/secret", META_UID: "9f9f9f9f"}
            ),
            Proof.NOT_OURS,
        ),
        # Another team's explicit id the spec does not claim.
        (_body("their-id"), None, None, Proof.UNPROVEN),
        (_body("their-id"), "my-id", None, Proof.UNPROVEN),
        # The id derived without an explicit id stays this task's when the spec adds one.
        (_body(MINE), "added-later", None, Proof.UNLISTED),
        # This task's job, but another run or another incarnation of it.
        (_body(MINE), None, _job(MINE, **{META_RUN: "2"}), Proof.TAKEN),
        (_body(MINE), None, _job(MINE, **{META_UID: "0000ffff"}), Proof.TAKEN),
        # An id our record would give another run number: not this run's.
        (_body(MINE, run=2), None, None, Proof.UNPROVEN),
        # No uid recorded: nothing to derive from.
        (_body(MINE, uid=None), None, None, Proof.UNPROVEN),
        # No id at all: nothing to prove.
        (_body(None), None, None, Proof.NOT_OURS),
        (_body(""), None, None, Proof.NOT_OURS),
    ],
)
def test_prove(
    body: TaskStatusBody, explicit: str | None, job: RayJob | None, proof: Proof
) -> None:
    assert prove(NAME, body, explicit, job, QUEUE) is proof


@pytest.mark.parametrize(
    ("proof", "active", "ended"),
    [
        (Proof.OURS, True, True),
        (Proof.UNLISTED, True, True),  # a write-ahead id: submitted again, once
        (Proof.TAKEN, True, True),  # the spec's own explicit id, recorded as a conflict
        # Nothing can be done under an id Ray does not list: an ended run keeps its record
        # (its explicit id may have changed since); a run not ended would be submitted or
        # followed under it, so its file is ignored.
        (Proof.UNPROVEN, False, True),
        (Proof.NOT_OURS, False, False),
    ],
)
def test_what_stands(proof: Proof, active: bool, ended: bool) -> None:
    assert proof.stands(ended=False) is active
    assert proof.stands(ended=True) is ended


def test_an_element_is_proven_by_its_own_name() -> None:
    element = "team-a/arr[0]"
    sid = for_run(element, UID, 1, None)
    job = _job(sid, **{META_TASK: element})
    assert prove(element, _body(sid), None, job, QUEUE) is Proof.OURS
    # The job of another element of the same array is not this one's.
    assert prove("team-a/arr[1]", _body(sid), None, job, QUEUE) is Proof.NOT_OURS


@pytest.mark.parametrize(
    ("metadata", "named"),
    [
        ({}, True),
        ({META_QUEUE: "other-queue"}, False),
        ({META_QUEUE: "-"}, False),
        ({META_TASK: "team-b/peek"}, False),
        ({META_TASK: "-"}, False),
        ({META_UID: "ffffffff"}, False),
        ({META_UID: ""}, True),  # submitted without a uid: judged by the rest
        ({META_RUN: "2"}, False),
    ],
)
def test_names_run(metadata: dict[str, str], named: bool) -> None:
    assert names_run(_job(MINE, **metadata), QUEUE, NAME, UID, 1) is named
