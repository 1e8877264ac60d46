"""The embedded Ray head, for real: `rayqueue serve` with team tokens and no `--address`
starts its own head; a job on it must not find serve's API token or cloud key in its
environment, and must find the variable the operator listed in RAYQUEUE_HEAD_ENV."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support.net import free_port

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {
    "RAYQUEUE_API_TOKEN": "serve-admin-token-0123456789abcdef-0123",
    "AWS_SECRET_ACCESS_KEY": "cloud-key-0123456789abcdef",
}


def test_a_job_on_the_embedded_head_sees_no_secret_of_serve(
    tmp_path: Path, tokens_file: Path
) -> None:
    tasks, seen = tmp_path / "tasks", tmp_path / "seen.json"
    (tasks / "team-a").mkdir(parents=True)
    dump = f"import json, os; json.dump(dict(os.environ), open({str(seen)!r}, 'w'))"
    spec = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": f"{sys.executable} -c {json.dumps(dump)}", "resources": {"cpu": 1}},
    }
    (tasks / "team-a" / "env.yaml").write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_DASHBOARD_ADDRESS")}
    env |= SECRETS | {"TEAM_PROXY": "http://proxy.example:3128", "RAYQUEUE_HEAD_ENV": "TEAM_PROXY"}
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "reconciler.cli", "serve", "--dir", str(tasks)]
    command += ["--port", str(free_port()), "--team-tokens", str(tokens_file)]
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while not seen.exists() or not seen.read_text().endswith("}"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        job_env = json.loads(seen.read_text())
        assert sorted(set(SECRETS) & set(job_env)) == []
        assert job_env["TEAM_PROXY"] == "http://proxy.example:3128"
        assert "runs as this scheduler's user" in log.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
