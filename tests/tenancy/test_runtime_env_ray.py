"""A disguised conda path against a real Ray head: a spec committed into team-a/ naming team-b's
conda file as `.../secret.yaml/` is refused by the loop serve builds, and no job on the head
ever carries the file's content (Ray's client would have read it and shipped it in the job's
runtime env). A plain task of the same folder, in the same passes, runs: the loop did submit."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import yaml

from reconciler.app.assembly import build_reconciler
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.settings.process import Settings
from tests.api.conftest import task_json

pytestmark = pytest.mark.ray


def test_a_disguised_conda_file_never_reaches_a_job(
    ray_head: str, tasks_dir: Path, tokens_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_submission = pytest.importorskip("ray.job_submission")
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
    (tasks_dir / "team-b" / "secret.yaml").write_text(yaml.safe_dump({"dependencies": [secret]}))
    # Relative to serve's folder, where Ray's client in serve's process opens it.
    monkeypatch.chdir(tasks_dir.parent)
    conda = "tasks/team-b/secret.yaml/"
    steal = task_json("echo stolen", runtimeEnv={"conda": conda})
    (tasks_dir / "team-a" / "steal.yaml").write_text(yaml.safe_dump(steal))
    (tasks_dir / "team-a" / "plain.yaml").write_text(yaml.safe_dump(task_json("echo plain")))
    settings = Settings(
        tasks_dir=tasks_dir,
        address=ray_head,
        queue_id=f"conda-{uuid.uuid4().hex[:8]}",
        team_tokens=tokens_file,
        rescan_seconds=0,
        rescan_cpu_share=0,
    )
    reconciler = build_reconciler(settings, RayJobsAdapter(ray_head, timeout_seconds=10))

    def phase(name: str) -> str | None:
        path = reconciler.store.status_path(name)
        if not path.exists():
            return None
        return str(yaml.safe_load(path.read_text())["status"].get("phase"))

    deadline = time.monotonic() + 60
    while phase("team-a/plain") != "Succeeded" and time.monotonic() < deadline:
        reconciler.run_pass()
        time.sleep(0.2)
    assert phase("team-a/plain") == "Succeeded"
    status = yaml.safe_load(reconciler.store.status_path("team-a/steal").read_text())["status"]
    assert status["phase"] == "Invalid"
    assert "spec.runtimeEnv.conda" in status["message"]
    assert not status.get("submissionId")
    jobs = job_submission.JobSubmissionClient(ray_head).list_jobs()
    assert any("echo plain" in job.entrypoint for job in jobs)
    assert not any(secret in repr(job) for job in jobs), "team-b's conda file reached a job"
