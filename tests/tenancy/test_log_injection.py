"""Logs are data: a file name a team chooses (a newline, then what looks like a log line) must
not forge a line in serve's text log, such as an audit line saying a platform admin deleted a
task. The text format escapes every message (and indents tracebacks), and with team tokens the
log is JSON unless text is asked for."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

import reconciler.app.daemon
from reconciler.app.logsetup import JsonFormatter, setup_logging
from reconciler.cli.main import main
from specs.settings.process import Settings, env_name, knobs
from tests.support.specs import task_yaml
from tests.support.world import World
from tests.unit.app.test_logsetup import restore_logging  # noqa: F401  (the fixture)

FORGED = "2026-12-07 17:00:00,000 INFO rayqueue.audit: deleted payroll by platform"


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


def test_a_message_and_a_traceback_stay_on_their_lines(
    restore_logging: None,  # noqa: F811
) -> None:
    out = io.StringIO()
    setup_logging(kind="text", stream=out)
    log = logging.getLogger("rayqueue.loop")
    log.warning("cannot read %s", f"team-a/x\n{FORGED}\r\x1b[2K\u2028")
    try:
        raise ValueError(f"bad name y\n{FORGED}")
    except ValueError:
        log.exception("pass failed")
    lines = out.getvalue().splitlines()
    assert not [line for line in lines if line.startswith(FORGED)], lines
    assert lines[0].endswith("cannot read team-a/x\\n" + FORGED + "\\r\\x1b[2K\\u2028")
    records = [line for line in lines if not line.startswith(" ")]
    assert len(records) == 2, lines  # a traceback's lines are indented under their record
    assert any(line.strip() == FORGED for line in lines)  # kept, as the indented line it is


@pytest.mark.parametrize(
    ("flags", "json_log"),
    [
        ([], False),
        (["--team-tokens", "{tokens}"], True),
        (["--team-tokens", "{tokens}", "--log-format", "text"], False),  # asked for: wins
        (["--log-format", "json"], True),
    ],
)
def test_the_json_log_is_the_default_with_team_tokens(
    restore_logging: None,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tokens_file: Path,
    flags: list[str],
    json_log: bool,
) -> None:
    served: list[Settings] = []
    monkeypatch.setattr(reconciler.app.daemon, "serve", served.append)
    for name, _ in knobs():
        monkeypatch.delenv(env_name(name), raising=False)
    args = [f.format(tokens=tokens_file) for f in flags]
    assert main(["serve", "--dir", str(tmp_path), *args]) == 0
    assert len(served) == 1
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_rayqueue_handler", False)]
    assert len(ours) == 1
    assert isinstance(ours[0].formatter, JsonFormatter) is json_log
