"""Logs are data: a file name a team chooses (a newline, then what looks like a log line) must
not forge a line in serve's text log, such as an audit line saying a platform admin deleted a
task. Names are escaped where they are logged."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from reconciler.app.logsetup import setup_logging
from tests.support.specs import task_yaml
from tests.support.world import World
from tests.unit.app.test_logsetup import restore_logging  # noqa: F401  (the fixture)

FORGED = "2026-12-07 17:00:00,000 INFO rayqueue.audit: deleted payroll by platform"


@pytest.mark.xfail(strict=True, reason="a newline in a file name is logged as it is")
def test_a_file_name_does_not_forge_a_log_line(
    restore_logging: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    setup_logging(kind="text", stream=out)
    tasks = tmp_path / "tasks"
    (tasks / "team-a").mkdir(parents=True)
    world = World.build(tasks)
    (tasks / "team-a" / f"y\n{FORGED}.yaml").write_text(task_yaml())
    world.step(3)
    text = out.getvalue()
    assert "team-a/y" in text, text  # the task was logged: the name went through the log
    forged = [line for line in text.splitlines() if line.startswith(FORGED)]
    assert forged == [], forged
