"""Submission ids on a real Ray head: an id with URL syntax never reaches another job."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_TASK, RUNNING, JobNotFound, RayRequestError, SubmitRequest
from tests.support.waiting import wait_until

pytestmark = pytest.mark.ray


def test_stop_with_a_path_trick_does_not_stop_the_job_it_names(
    ray_adapter: RayJobsAdapter,
) -> None:
    victim = f"team-b-train-{uuid.uuid4().hex[:12]}"
    ray_adapter.submit(
        SubmitRequest(victim, "python -c 'import time; time.sleep(120)'", None, {META_TASK: "b"})
    )
    try:
        wait_until(
            lambda: ray_adapter.job_info(victim).status == RUNNING, timeout=60, what="victim runs"
        )
        # Before the fix the first went out as POST /api/jobs/<victim>/stop?/stop: Ray's stop of
        # <victim>. Encoded, each is an id Ray does not know.
        for trick in (f"{victim}/stop?", f"{victim}%2Fstop", f"{victim}/stop", f"{victim}?"):
            with pytest.raises(JobNotFound):
                ray_adapter.stop(trick)
            with pytest.raises(JobNotFound):
                ray_adapter.delete(trick)
        assert ray_adapter.job_info(victim).status == RUNNING
        # And an id that would break Ray's driver log path is never submitted.
        with pytest.raises(RayRequestError, match="not submitted"):
            ray_adapter.submit(SubmitRequest(f"{victim}/x", "echo no", None, {META_TASK: "a"}))
        assert all(j.submission_id != f"{victim}/x" for j in ray_adapter.list_jobs())
    finally:
        with contextlib.suppress(JobNotFound):
            ray_adapter.stop(victim)
