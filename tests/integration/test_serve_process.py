"""`rayqueue serve` as a user runs it: a process with the API and a private Ray head."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.net import answers, free_port

pytestmark = pytest.mark.ray


def test_sigterm_shuts_down_api_and_private_head(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_DASHBOARD_ADDRESS")}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler.cli",
                "serve",
                "--dir",
                str(tmp_path / "tasks"),
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=Path(__file__).parents[2],
        )
    try:
        deadline = time.monotonic() + 90
        while not answers(f"http://127.0.0.1:{port}/healthz"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        match = re.search(r"dashboard at (http://\S+)", log.read_text())
        assert match, log.read_text()
        dashboard = match.group(1)
        assert answers(f"{dashboard}/api/version")
        proc.send_signal(signal.SIGTERM)
        # uvicorn re-raises the signal after its own shutdown; it must not kill us before
        # the private head is stopped.
        assert proc.wait(timeout=60) == 0, log.read_text()
        assert "stopping the local Ray head" in log.read_text()
        assert not answers(f"{dashboard}/api/version")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
