"""head.json: serve records where its Ray is; the CLI finds it, and ignores a stale one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from reconciler.shell.ops import head_record


def test_write_lookup_remove(tmp_path: Path) -> None:
    path = head_record.write(tmp_path, "http://127.0.0.1:8265", private=True)
    found = head_record.lookup(tmp_path)
    assert found.address == "http://127.0.0.1:8265"
    assert "private Ray head" in found.note and str(os.getpid()) in found.note
    head_record.remove(tmp_path)
    assert not path.exists()
    missing = head_record.lookup(tmp_path)
    assert missing.address is None and "no running" in missing.note


def test_a_record_of_a_dead_process_is_ignored_with_a_message(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    record = head_record.HeadRecord("http://10.0.0.1:8265", child.pid, private=True)
    (tmp_path / head_record.RECORD_NAME).write_text(record.to_json())
    found = head_record.lookup(tmp_path)
    assert found.address is None
    assert f"pid {child.pid}" in found.note and "no longer running" in found.note


def test_a_recycled_pid_does_not_revive_a_record(tmp_path: Path) -> None:
    # Our own pid, alive, but with another start time: a different process now holds the pid.
    record = head_record.HeadRecord("http://x:8265", os.getpid(), False, process_start="1")
    (tmp_path / head_record.RECORD_NAME).write_text(record.to_json())
    expected_alive = head_record.process_start(os.getpid()) is None  # no /proc: cannot tell
    assert (head_record.lookup(tmp_path).address is not None) is expected_alive


def test_remove_leaves_a_successors_record(tmp_path: Path) -> None:
    other = head_record.HeadRecord("http://other:8265", os.getppid(), False)
    (tmp_path / head_record.RECORD_NAME).write_text(other.to_json())
    head_record.remove(tmp_path)
    assert json.loads((tmp_path / head_record.RECORD_NAME).read_text())["address"] == (
        "http://other:8265"
    )


def test_an_unreadable_record_is_ignored(tmp_path: Path) -> None:
    (tmp_path / head_record.RECORD_NAME).write_text("{not json")
    found = head_record.lookup(tmp_path)
    assert found.address is None and "cannot be read" in found.note
