"""What any job can do through Ray's own API on a shared cluster, as docs/deploy.md's threat
model says: Ray has no per-job authorization, so a job that calls `ray.init()` and the Job SDK
at its dashboard lists every job's `env_vars` and stops another team's job. This documents
Ray's model, not a bug of rayqueue: if it ever fails, Ray has added authorization and the
threat model must be updated."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

ATTACK = """
import sys
import ray
from ray.job_submission import JobSubmissionClient

context = ray.init()
client = JobSubmissionClient("http://" + context.dashboard_url)
for job in client.list_jobs():
    print("seen", job.submission_id, (job.runtime_env or {}).get("env_vars"), flush=True)
print("stopped", client.stop_job(sys.argv[1]), flush=True)
"""


def test_a_job_reads_other_jobs_env_vars_and_stops_them(ray_head: str, tmp_path: Path) -> None:
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(ray_head)
    secret = f"team-b-secret-{uuid.uuid4().hex}"
    victim = client.submit_job(
        entrypoint="sleep 120", runtime_env={"env_vars": {"TEAM_B_KEY": secret}}
    )
    script = tmp_path / "attack.py"
    script.write_text(ATTACK)
    attacker = ""
    try:
        _wait(lambda: client.get_job_status(victim) == JobStatus.RUNNING, "the victim to run")
        attacker = client.submit_job(entrypoint=f"{sys.executable} {script} {victim}")
        _wait(lambda: client.get_job_status(attacker).is_terminal(), "the attacker to end")
        output = client.get_job_logs(attacker)
        assert client.get_job_status(attacker) == JobStatus.SUCCEEDED, output
        assert secret in output  # another job's env_vars, read through Ray's API
        assert "stopped True" in output
        _wait(lambda: client.get_job_status(victim) == JobStatus.STOPPED, "the victim to stop")
    finally:
        for job in (victim, attacker):
            if job and not client.get_job_status(job).is_terminal():
                client.stop_job(job)


def _wait(done: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)
