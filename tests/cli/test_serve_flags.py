"""`serve` has a few flags in three groups; tuning knobs come from RAYQUEUE_<NAME> (one table in
docs/settings.md); retired flags still work with a warning; the README's synopsis lists
exactly the flags; preemption has one place when there is a queue file; GC is tuned by
serve's daemon only."""

from __future__ import annotations

import argparse
import gc
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import reconciler.app.daemon
from reconciler.app.assembly import build_reconciler
from reconciler.cli.main import build_parser, main
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.settings.process import GROUPS, Settings, env_name, knobs
from specs.tenancy.access import Tokens

ROOT = Path(__file__).resolve().parents[2]


def _serve() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    result: argparse.ArgumentParser = sub.choices["serve"]
    return result


def _shown(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.help != argparse.SUPPRESS]


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Settings]:
    calls: list[Settings] = []
    monkeypatch.setattr(reconciler.app.daemon, "serve", calls.append)
    for var in ("RAY_DASHBOARD_ADDRESS", "RAY_ADDRESS", "RAYQUEUE_DIR"):
        monkeypatch.delenv(var, raising=False)
    for name, _ in knobs():
        monkeypatch.delenv(env_name(name), raising=False)
    return calls


def test_serve_has_at_most_twenty_flags() -> None:
    shown = _shown(_serve())
    assert len(shown) <= 20, [a.option_strings for a in shown]


def test_help_shows_the_three_groups_each_with_its_own_knobs() -> None:
    parser = _serve()
    titles = [g.title for g in parser._action_groups]
    assert [t for t in titles if t in GROUPS.values()] == list(GROUPS.values())
    group_of = {k.flag: k.group for _, k in knobs() if k.flag is not None}
    for group in parser._action_groups:
        if group.title not in GROUPS.values():
            continue
        key = next(k for k, title in GROUPS.items() if title == group.title)
        flags = [a.option_strings[0] for a in group._group_actions]
        assert flags and all(group_of[f] == key for f in flags)
    usage = parser.format_usage()
    for _, knob in knobs():
        if knob.old_flag is not None:
            assert f"[{knob.old_flag}" not in usage


def _synopsis() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## `rayqueue serve`", 1)[1]
    return section.split("```", 2)[1]


def test_the_readme_synopsis_lists_exactly_the_serve_flags() -> None:
    written = set(re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", _synopsis()))
    flags = {a.option_strings[0] for a in _shown(_serve()) if a.dest != "help"}
    assert written == flags


def test_the_settings_table_lists_every_tuning_knob_once() -> None:
    text = (ROOT / "docs" / "settings.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `RAYQUEUE_")]
    listed = [re.match(r"\| `(RAYQUEUE_\w+)`", row).group(1) for row in rows]  # type: ignore[union-attr]
    tuning = [env_name(name) for name, knob in knobs() if knob.tuning]
    assert sorted(listed) == sorted(tuning)
    for name, knob in knobs():
        if knob.old_flag is not None:
            row = next(r for r in rows if r.startswith(f"| `{env_name(name)}`"))
            assert f"`{knob.old_flag}`" in row


def test_a_tuning_knob_comes_from_its_variable(
    served: list[Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYQUEUE_MAX_INFLIGHT", "4")
    monkeypatch.setenv("RAYQUEUE_API", "false")
    monkeypatch.setenv("RAYQUEUE_ALLOWED_ORIGINS", "https://a.example, https://b.example")
    monkeypatch.setenv("RAYQUEUE_RAY_HISTORY_RETENTION_SECONDS", "3600")
    monkeypatch.setenv("RAYQUEUE_LOST_GRACE_SECONDS", "")  # empty: unset
    assert main(["serve", "--dir", "/t"]) == 0
    s = served[0]
    assert (s.max_inflight, s.api, s.ray_history_retention_seconds) == (4, False, 3600)
    assert s.allowed_origins == ("https://a.example", "https://b.example")
    assert s.lost_grace_seconds == Settings.__dataclass_fields__["lost_grace_seconds"].default


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("RAYQUEUE_INTERVAL_SECONDS", "0", "RAYQUEUE_INTERVAL_SECONDS must be greater than 0"),
        ("RAYQUEUE_MAX_INFLIGHT", "0", "RAYQUEUE_MAX_INFLIGHT must be at least 1, not 0"),
        ("RAYQUEUE_MAX_INFLIGHT", "many", "RAYQUEUE_MAX_INFLIGHT must be a whole number"),
        ("RAYQUEUE_LOST_GRACE_SECONDS", "soon", "RAYQUEUE_LOST_GRACE_SECONDS must be a number"),
        ("RAYQUEUE_API", "maybe", "RAYQUEUE_API must be true or false, not 'maybe'"),
        (
            "RAYQUEUE_PREEMPTION_MIN_PREEMPTOR_PRIORITY",
            "10",
            "RAYQUEUE_PREEMPTION_MIN_PREEMPTOR_PRIORITY must be between 0 and 9, not 10",
        ),
        ("RAYQUEUE_ALLOWED_ORIGINS", "evil", "--allowed-origins: 'evil' is not an origin"),
    ],
)
def test_a_bad_variable_is_a_usage_error_naming_it(
    served: list[Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    var: str,
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv(var, value)
    assert main(["serve", "--dir", "/t"]) == 2
    assert served == []
    assert message in capsys.readouterr().err


def test_interval_zero_is_refused_as_a_flag_too(
    served: list[Settings], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--dir", "/t", "--interval", "0"]) == 2
    assert "--interval must be greater than 0, not 0" in capsys.readouterr().err
    assert served == []


def test_plan_reads_the_planner_s_variables_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYQUEUE_MAX_INFLIGHT", "3")
    monkeypatch.setenv("RAYQUEUE_HISTORY_HEARTBEAT_SECONDS", "0")  # serve's, not plan's
    from reconciler.cli.flags import settings_from_args

    args = build_parser().parse_args(["plan", "--dir", "/t"])
    assert settings_from_args(args).plan_options().max_inflight == 3


def test_a_retired_flag_still_works_with_a_warning_and_beats_its_variable(
    served: list[Settings], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAYQUEUE_MAX_INFLIGHT", "3")
    assert main(["serve", "--dir", "/t", "--max-inflight", "5", "--no-api"]) == 0
    assert (served[0].max_inflight, served[0].api) == (5, False)
    err = capsys.readouterr().err
    assert "--max-inflight is deprecated; set RAYQUEUE_MAX_INFLIGHT" in err
    assert "--no-api is deprecated; set RAYQUEUE_API" in err
    assert main(["serve", "--dir", "/t"]) == 0
    assert served[1].max_inflight == 3
    assert "deprecated" not in capsys.readouterr().err


@pytest.fixture
def queue_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "_queues.yaml"
    path.write_text("apiVersion: rayqueue/v1\nkind: QueueConfig\n")
    yield path


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["--preemption", "LowerPriority"], {}, "--preemption:"),
        (["--preemption-grace-seconds", "5"], {}, "--preemption-grace-seconds / "),
        ([], {"RAYQUEUE_PREEMPTION_MIN_RUNTIME_SECONDS": "60"}, "RAYQUEUE_PREEMPTION_MIN_RUNTIME"),
        ([], {"RAYQUEUE_PREEMPTION_MIN_PREEMPTOR_PRIORITY": "7"}, "minPreemptorPriority"),
        ([], {"RAYQUEUE_PREEMPTION_MAX_PER_TASK": "5"}, "maxPerTask"),
    ],
)
@pytest.mark.parametrize("command", ["serve", "plan"])
def test_beside_a_queue_file_the_preemption_flags_are_refused_naming_it(
    served: list[Settings],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    queue_file: Path,
    command: str,
    argv: list[str],
    env: dict[str, str],
    named: str,
) -> None:
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    address = ["--address", "http://h:8265"] if command == "plan" else []
    assert main([command, "--dir", str(queue_file.parent), *address, *argv]) == 2
    err = capsys.readouterr().err
    assert named in err and f"preemption is configured in {queue_file}" in err
    assert served == []


def test_without_a_queue_file_the_preemption_flags_set_the_one_queue(
    served: list[Settings], tmp_path: Path
) -> None:
    argv = ["serve", "--dir", str(tmp_path), "--preemption", "LowerPriority"]
    assert main([*argv, "--preemption-grace-seconds", "5"]) == 0
    assert (served[0].preemption, served[0].preemption_grace_seconds) == ("LowerPriority", 5)


def test_max_per_task_is_3_by_default_and_set_by_the_flag_without_a_queue_file(
    served: list[Settings], tmp_path: Path
) -> None:
    assert main(["serve", "--dir", str(tmp_path)]) == 0
    assert main(["serve", "--dir", str(tmp_path), "--preemption-max-per-task", "0"]) == 0
    assert [s.preemption_max_per_task for s in served] == [3, 0]


def test_building_a_loop_leaves_the_gc_alone(tmp_path: Path) -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    build_reconciler(
        Settings(tasks_dir=tmp_path, queue_id="q"), FakeRay(Capacity(4, 0, 2**34)), tokens=Tokens()
    )
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen


def test_the_daemon_tunes_gc_before_it_builds_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    class Built(Exception):
        pass

    def build(*args: object, **kwargs: object) -> None:
        calls.append("build")
        raise Built

    monkeypatch.setattr(reconciler.app.daemon, "tune_gc", lambda: calls.append("tune_gc"))
    monkeypatch.setattr(reconciler.app.daemon, "build_reconciler", build)
    settings = Settings(tasks_dir=tmp_path, address="http://127.0.0.1:9", api=False)
    with pytest.raises(Built):
        reconciler.app.daemon.serve(settings)
    assert calls == ["tune_gc", "build"]


def test_the_scale_up_timeout_is_set_by_its_variable_as_the_docs_say(
    served: list[Settings], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The issue asked for --scale-up-timeout; serve keeps to twenty flags, so it is a tuning
    # knob, and docs/autoscaling.md and docs/settings.md give this exact line.
    for doc in ("autoscaling.md", "settings.md"):
        assert (
            "RAYQUEUE_SCALE_UP_TIMEOUT_SECONDS=1200 rayqueue serve"
            in (ROOT / "docs" / doc).read_text()
        )
    monkeypatch.setenv("RAYQUEUE_SCALE_UP_TIMEOUT_SECONDS", "1200")
    assert main(["serve", "--dir", "/t"]) == 0
    assert served[0].scale_up_timeout_seconds == 1200
    assert served[0].plan_options().scale_up_timeout_seconds == 1200
    assert main(["serve", "--dir", "/t", "--scale-up-timeout", "60"]) == 2
    out = capsys.readouterr()
    assert "--scale-up-timeout" in out.err + out.out


def test_the_readme_writes_no_retired_flag() -> None:
    # A retired flag still works, with a warning; the README teaches the variable instead.
    readme = (ROOT / "README.md").read_text()
    retired = [knob.old_flag for _, knob in knobs() if knob.old_flag is not None]
    assert retired and [flag for flag in retired if f"`{flag}`" in readme] == []
