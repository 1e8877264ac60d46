"""benchmarks/cpushare.py: the head's processes told apart by kind, and their CPU counted
inside the window only."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from benchmarks.cpushare import CpuShare, kind_of
from benchmarks.throughput import breakdown_table


@pytest.mark.parametrize(
    ("cmdline", "kind"),
    [
        ("/venv/lib/ray/core/src/ray/gcs/gcs_server --gcs_server_port=1", "gcs"),
        ("/venv/lib/ray/core/src/ray/raylet/raylet --raylet_socket_name=/tmp/s/raylet", "raylet"),
        ("ray::JobSupervisor --raylet-name=/tmp/x/sockets/raylet", "Ray workers"),
        ("ray::IDLE", "Ray workers"),
        ("python -u /venv/lib/ray/dashboard/agent.py --node-ip-address=1", "dashboard agent"),
        ("python /venv/lib/ray/dashboard/dashboard.py --host=127.0.0.1", "dashboard"),
        ("python -m reconciler.cli serve --dir /tmp/t", "serve"),
        ("/bin/sh -c true", "job driver / other"),
    ],
)
def test_each_kind_of_process_is_named_by_its_command_line(cmdline: str, kind: str) -> None:
    assert kind_of(cmdline) == kind


# Waits for a line on stdin, then burns 0.3 s of CPU, then sleeps.
_BURN = (
    "import sys, time\n"
    "sys.stdin.readline()\n"
    "t = time.process_time()\n"
    "while time.process_time() - t < 0.3: pass\n"
    "time.sleep(30)\n"
)


def test_a_marked_process_is_counted_inside_the_window_and_an_unmarked_one_is_not() -> None:
    burn = [sys.executable, "-c", _BURN]
    marked = subprocess.Popen(
        burn, stdin=subprocess.PIPE, env={**os.environ, "RAYQUEUE_LOCAL_HEAD": "/tmp/rq-test-x"}
    )
    other = subprocess.Popen(burn, stdin=subprocess.PIPE)
    try:
        with CpuShare("/tmp/rq-test-x", period=0.05) as share:
            for proc in (marked, other):
                assert proc.stdin is not None
                proc.stdin.write(b"go\n")
                proc.stdin.flush()
            for _ in range(600):  # until the marked child has burnt its 0.3 s (or 30 s)
                if share.totals().get("job driver / other", 0.0) >= 0.3:
                    break
                time.sleep(0.05)
        totals = share.totals()
        assert totals.keys() == {"job driver / other"}  # the unmarked child is not counted
        # its burn inside the window, not its start before it, nor the other child's burn
        assert 0.3 <= totals["job driver / other"] < 0.5
    finally:
        for proc in (marked, other):
            proc.kill()
            proc.wait()


def test_the_breakdown_gives_each_sides_medians() -> None:
    runs: list[dict[str, object]] = [
        {"side": "A", "seconds": 10.0, "cpu": {"dashboard": 1.0}, "requests": {"list_jobs": 90}},
        {"side": "A", "seconds": 12.0, "cpu": {"dashboard": 3.0}, "requests": {"list_jobs": 110}},
        {"side": "B", "seconds": 11.0, "cpu": {"serve": 0.5}, "requests": {"serve submit": 16}},
    ]
    text = breakdown_table(runs)
    assert "side A: 2 runs, median 11.0 s" in text
    assert "dashboard" in text and "2.00 s CPU" in text and "100.00 requests" in text
    assert "side B: 1 runs" in text and "serve submit" in text
