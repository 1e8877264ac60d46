"""The parser as a whole: help on every command, exit codes, `schema`, and `serve`'s flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import reconciler.app.daemon
from reconciler.app.daemon import ServeError
from reconciler.cli.main import build_parser, main
from specs.settings.process import DEFAULT_PORT, Settings
from specs.task.schema import render_schema

COMMANDS = [
    "serve", "apply", "get", "describe", "delete", "suspend", "resume", "set-priority",
    "rerun", "queues", "suggest", "logs", "validate", "plan", "schema", "token",
]  # fmt: skip


def test_every_command_is_listed() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_on_every_command(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: rayqueue {command}")
    assert "example" in out  # every command shows how it is used


def test_top_level_help_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_schema_prints_the_committed_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    out = capsys.readouterr().out
    assert out == render_schema()
    assert json.loads(out)["title"] == "rayqueue Task"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    calls: list[Settings] = []
    monkeypatch.setattr(reconciler.app.daemon, "serve", calls.append)
    for var in ("RAY_DASHBOARD_ADDRESS", "RAY_ADDRESS", "RAYQUEUE_DIR"):
        monkeypatch.delenv(var, raising=False)
    return calls


def test_serve_flags(served: list[Settings]) -> None:
    argv = [
        "serve", "--dir", "/tasks", "--host", "0.0.0.0", "--address", "http://head:8265",
        "--status-dir", "/status", "--state-dir", "/state", "--queue-id", "q1",
        "--port", "9000", "--no-api", "--policy", "besteffort", "--interval", "0.5",
        "--max-inflight", "4", "--start-timeout", "60", "--lost-grace", "5",
        "--max-stops-per-pass", "3", "--allow-mass-delete", "--count-foreign-jobs",
        "--num-cpus", "2", "--standby",
    ]  # fmt: skip
    assert main(argv) == 0
    assert served == [
        Settings(
            tasks_dir=Path("/tasks"),
            address="http://head:8265",
            status_dir=Path("/status"),
            state_dir=Path("/state"),
            queue_id="q1",
            host="0.0.0.0",
            port=9000,
            api=False,
            interval_seconds=0.5,
            policy="besteffort",
            max_inflight=4,
            start_timeout_seconds=60,
            lost_grace_seconds=5,
            max_stops_per_pass=3,
            allow_mass_delete=True,
            count_foreign_jobs=True,
            local_num_cpus=2,
            standby=True,
        )
    ]


def test_serve_defaults(served: list[Settings], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_DASHBOARD_ADDRESS", "http://head:8265")
    assert main(["serve"]) == 0
    settings = served[0]
    assert settings.tasks_dir == Path("tasks")
    assert settings.address == "http://head:8265"
    assert (settings.host, settings.port, settings.api) == ("127.0.0.1", DEFAULT_PORT, True)
    assert settings.policy == "backfill"  # the default
    assert settings.preemption == "Never"
    monkeypatch.setenv("RAYQUEUE_DIR", "/from/env")
    assert main(["--dir", "/before", "serve"]) == 0
    assert served[1].tasks_dir == Path("/before")
    assert main(["serve"]) == 0
    assert served[2].tasks_dir == Path("/from/env")


def test_serve_errors(
    served: list[Settings], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--port", "70000"]) == 2
    assert main(["serve", "--max-inflight", "0"]) == 2

    def fail(settings: Settings) -> None:
        raise ServeError("cannot create tasks folder")

    monkeypatch.setattr(reconciler.app.daemon, "serve", fail)
    assert main(["serve"]) == 1
    assert "cannot create tasks folder" in capsys.readouterr().err


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"rayqueue {metadata.version('rayqueue')}"


def test_licence_and_changelog_name_the_project_version() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    licence = (root / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    changelog = (root / "CHANGELOG.md").read_text()
    assert f"## {project['version']}" in changelog
