"""Each setting is declared once (specs.settings.process); the CLI's flags and the planner's options
are derived from it, and a bad value is refused in one place, with one message."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

import reconciler.app.daemon
from reconciler.cli.flags import settings_from_args
from reconciler.cli.main import build_parser, main
from reconciler.core.admission import policies
from reconciler.core.preemption import victims
from specs.settings.process import (
    POLICY_NAMES,
    PREEMPTION_MODES,
    Knob,
    PlannerSettings,
    PlanOptions,
    Settings,
    knobs,
    value_type,
)


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    result: argparse.ArgumentParser = sub.choices[command]
    return result


def _actions(command: str) -> dict[str, argparse.Action]:
    return {a.dest: a for a in _subparser(command)._actions}


@pytest.mark.parametrize("command", ["serve", "plan"])
def test_every_flagged_knob_has_its_flag_default_and_help(command: str) -> None:
    actions = _actions(command)
    expected = [(n, k) for n, k in knobs() if k.flag is not None and command in k.commands]
    assert expected, "no knob for this command"
    for name, knob in expected:
        action = actions[name]
        assert action.option_strings == [knob.flag]
        assert action.help == knob.help
        default = Settings.__dataclass_fields__[name].default
        if value_type(name) is bool:
            assert action.default is default
        elif value_type(name) is tuple:
            assert tuple(action.default) == default  # a list argparse can append to
        else:
            assert action.default == default


def test_every_flag_of_serve_beyond_the_folder_options_is_a_knob() -> None:
    derived = {k.flag for _, k in knobs() if k.flag is not None and "serve" in k.commands}
    retired = {k.old_flag for _, k in knobs() if k.old_flag is not None and "serve" in k.commands}
    own = {"-h", "--help", "--dir", "--status-dir", "--address", "-v", "--verbose"}
    actions = _subparser("serve")._actions
    shown = {s for a in actions if a.help != argparse.SUPPRESS for s in a.option_strings}
    hidden = {s for a in actions if a.help == argparse.SUPPRESS for s in a.option_strings}
    assert shown - own == derived
    assert hidden == retired  # still accepted, not in --help


def test_plan_takes_only_the_loop_knobs() -> None:
    actions = _actions("plan")
    assert "max_inflight" in actions and "policy" in actions
    assert "port" not in actions and "standby" not in actions


def test_the_policy_choices_are_the_registry() -> None:
    assert tuple(_actions("serve")["policy"].choices or ()) == tuple(policies.POLICIES)
    assert tuple(_actions("plan")["policy"].choices or ()) == tuple(policies.POLICIES)


@pytest.mark.parametrize("command", ["serve", "plan"])
def test_the_preemption_choices_are_the_module_s(command: str) -> None:
    actions = _actions(command)
    assert tuple(actions["preemption"].choices or ()) == victims.MODES
    args = build_parser().parse_args(
        [
            *(command, "--dir", "/t", "--preemption", "LowerPriority"),
            *("--preemption-grace-seconds", "5", "--preemption-min-runtime-seconds", "60"),
            *("--preemption-min-preemptor-priority", "7"),
        ]
    )
    options = settings_from_args(args).plan_options()
    assert (options.preemption, options.preemption_grace_seconds) == ("LowerPriority", 5)
    assert options.preemption_min_runtime_seconds == 60
    assert options.preemption_min_preemptor_priority == 7


def test_defaults_parse_back_to_default_settings() -> None:
    args = build_parser().parse_args(["serve", "--dir", "/t", "--address", "http://h:8265"])
    assert settings_from_args(args) == Settings(tasks_dir=Path("/t"), address="http://h:8265")


def test_plan_options_defaults_come_from_settings() -> None:
    settings = Settings(tasks_dir=Path("/t"), queue_id="q")
    options = settings.plan_options()
    assert options == dataclasses.replace(PlanOptions(), queue_id="q")
    assert PlanOptions().max_inflight == Settings.__dataclass_fields__["max_inflight"].default
    changed = Settings(tasks_dir=Path("/t"), ray_history_retention_seconds=5, max_inflight=3)
    assert changed.plan_options().ray_history_retention_seconds == 5
    assert changed.plan_options().max_inflight == 3


BAD = [
    ("max_inflight", 0, "--max-inflight", "--max-inflight must be at least 1, not 0"),
    ("port", 70000, "--port", "--port must be between 1 and 65535, not 70000"),
    ("port", 0, "--port", "--port must be between 1 and 65535, not 0"),
    ("start_timeout_seconds", -1, "--start-timeout", "--start-timeout must be at least 0"),
    ("lost_grace_seconds", -2.5, "--lost-grace", "--lost-grace must be at least 0, not -2.5"),
    ("ray_history_retention_seconds", -1, "--ray-history-retention", "must be at least 0"),
    ("max_stops_per_pass", -1, "--max-stops-per-pass", "must be at least 0, not -1"),
    ("local_num_cpus", -1, "--num-cpus", "--num-cpus must be at least 0, not -1"),
    (
        "preemption_min_preemptor_priority",
        10,
        "--preemption-min-preemptor-priority",
        "--preemption-min-preemptor-priority must be between 0 and 9, not 10",
    ),
    (
        "preemption_min_preemptor_priority",
        -1,
        "--preemption-min-preemptor-priority",
        "--preemption-min-preemptor-priority must be between 0 and 9, not -1",
    ),
]


@pytest.mark.parametrize(("name", "value", "flag", "message"), BAD)
def test_a_bad_value_is_refused_the_same_way_by_settings_and_the_cli(
    name: str,
    value: float,
    flag: str,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ValueError, match="^" + flag) as raised:
        Settings(tasks_dir=Path("/t"), **{name: value})  # type: ignore[arg-type]
    assert message in str(raised.value)

    served: list[Settings] = []
    monkeypatch.setattr(reconciler.app.daemon, "serve", served.append)
    assert main(["serve", "--dir", "/t", flag, str(value)]) == 2
    assert served == []
    assert f"error: {raised.value}" in capsys.readouterr().err


def test_plan_refuses_a_bad_value_with_the_same_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "--address", "http://h:8265", "--lost-grace", "-1"]) == 2
    assert "--lost-grace must be at least 0, not -1" in capsys.readouterr().err


def test_knobs_without_a_flag_are_checked_too() -> None:
    with pytest.raises(ValueError, match="ray_timeout_seconds must be at least 0"):
        Settings(tasks_dir=Path("/t"), ray_timeout_seconds=-1)
    assert Settings(tasks_dir=Path("/t"), settle_seconds=0).settle_seconds == 0


def _out_of_range(knob: Knob) -> list[float]:
    values: list[float] = []
    if knob.minimum is not None:
        values.append(knob.minimum - 1)
    if knob.maximum is not None:
        values.append(knob.maximum + 1)
    if knob.above is not None:
        values.append(knob.above)
    return values


RANGED = [(n, k, v) for n, k in knobs() for v in _out_of_range(k)]


@pytest.mark.parametrize(("name", "knob", "value"), RANGED, ids=[f"{n}={v}" for n, _, v in RANGED])
def test_every_knob_s_range_is_checked_from_code(name: str, knob: Knob, value: float) -> None:
    kind = value_type(name)
    given = int(value) if kind is int else value
    with pytest.raises(ValueError, match="^" + re.escape(knob.label(name)) + " must be"):
        Settings(tasks_dir=Path("/t"), **{name: given})  # type: ignore[arg-type]
    if name in {f.name for f in dataclasses.fields(PlannerSettings)}:
        with pytest.raises(ValueError, match="must be"):
            PlanOptions(**{name: given})  # type: ignore[arg-type]


def test_every_number_knob_has_a_range() -> None:
    for name, knob in knobs():
        if value_type(name) in (int, float):
            assert _out_of_range(knob), f"{name} accepts any number"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("policy", "typo", "--policy must be one of strict, backfill, besteffort, not 'typo'"),
        ("preemption", "Always", "--preemption must be one of Never, LowerPriority, not 'Always'"),
        ("log_format", "xml", "--log-format must be one of text, json, not 'xml'"),
    ],
)
def test_a_name_outside_the_choices_is_refused_from_code(
    name: str, value: str, message: str
) -> None:
    with pytest.raises(ValueError) as raised:
        Settings(tasks_dir=Path("/t"), **{name: value})  # type: ignore[arg-type]
    assert str(raised.value) == message
    if name != "log_format":
        with pytest.raises(ValueError, match=re.escape(message)):
            PlanOptions(**{name: value})  # type: ignore[arg-type]


def test_interval_zero_is_refused_from_code() -> None:
    with pytest.raises(ValueError, match="--interval must be greater than 0, not 0"):
        Settings(tasks_dir=Path("/t"), interval_seconds=0)
    with pytest.raises(ValueError, match="must be a number"):
        Settings(tasks_dir=Path("/t"), interval_seconds=float("nan"))


def test_the_choices_are_the_registries() -> None:
    assert tuple(policies.POLICIES) == POLICY_NAMES
    assert PREEMPTION_MODES == victims.MODES


def test_plan_options_declare_nothing_of_their_own_but_the_queue_id_and_visibility() -> None:
    # Both are resolved from more than the planner knobs: the queue id from the folder, the
    # visibility from the team tokens file.
    shared = {f.name for f in dataclasses.fields(PlannerSettings)}
    assert {f.name for f in dataclasses.fields(PlanOptions)} - shared == {"queue_id", "visibility"}
    settings_fields = {f.name: f for f in dataclasses.fields(Settings)}
    for f in dataclasses.fields(PlannerSettings):
        assert isinstance(f.metadata.get("knob"), Knob), f.name
        assert f.metadata["knob"].group == "planner"
        assert settings_fields[f.name].default == f.default  # one default, the same field
    # The planner knobs are exactly the planner group.
    assert shared == {n for n, k in knobs() if k.group == "planner"}
