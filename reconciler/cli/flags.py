"""Command-line flags and environment derived from the Settings declaration, and Settings built
back from them.

Each knob in specs/settings/process.py names its group, its flag (or, for a tuning knob, none: it is
read from RAYQUEUE_<NAME>), its help text and the commands that take it; this module only
walks that declaration. Values are checked by Settings itself when it is built, so a flag, a
variable and the code path refuse a bad value with the same words.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from reconciler.cli.common import EXIT_USAGE, CliError, tasks_dir
from specs.queues.config import config_path
from specs.settings.process import (
    GROUPS,
    Knob,
    PlannerSettings,
    Settings,
    address_from_env,
    env_name,
    knobs,
    value_type,
)

SETTINGS_DOC = "docs/settings.md"
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def add_setting_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """Add the flags of every knob `command` takes, one argument group per knob group; a
    tuning knob's retired flag is still accepted, hidden from --help."""
    taken = [(name, knob) for name, knob in knobs() if command in knob.commands]
    shown = {knob.group for _, knob in taken if knob.flag is not None}
    groups = {g: parser.add_argument_group(title) for g, title in GROUPS.items() if g in shown}
    for name, knob in taken:
        if knob.flag is not None:
            _add_flag(groups[knob.group], name, knob, knob.flag)
        elif knob.old_flag is not None:
            _add_flag(parser, name, knob, knob.old_flag, retired=True)


def _add_flag(
    to: argparse._ActionsContainer, name: str, knob: Knob, flag: str, *, retired: bool = False
) -> None:
    declared = Settings.__dataclass_fields__[name].default
    # A retired flag leaves no attribute unless it is given, so the environment can fill in.
    default = argparse.SUPPRESS if retired else declared
    help = argparse.SUPPRESS if retired else knob.help
    kind = value_type(name)
    if kind is bool:
        # A flag switches the default: --standby turns it on, --no-api turns it off.
        action = "store_false" if declared else "store_true"
        to.add_argument(flag, action=action, dest=name, help=help, default=default)
        return
    if kind is tuple:
        # Repeated or comma-separated; argparse copies the list default before appending.
        to.add_argument(
            flag,
            action="append",
            default=default if retired else [],
            dest=name,
            help=help,
            metavar=knob.metavar,
        )
        return
    extra: dict[str, object] = {}
    if kind is not str:
        extra["type"] = kind
    if knob.choices is not None:
        extra["choices"] = knob.choices
    if knob.metavar is not None:
        extra["metavar"] = knob.metavar
    to.add_argument(flag, default=default, dest=name, help=help, **extra)  # type: ignore[arg-type]


def settings_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> Settings:
    """Settings from the folder and address options, every knob flag that was parsed, and the
    RAYQUEUE_<NAME> variables of the tuning knobs the command takes.

    A value Settings refuses is a usage error (exit 2) with Settings' own message; a retired
    flag still works, with a warning on stderr naming its variable.
    """
    env = os.environ if environ is None else environ
    command = getattr(args, "command", None) or "serve"
    values: dict[str, object] = {
        "tasks_dir": tasks_dir(args.dir),
        "address": getattr(args, "address", None) or address_from_env(),
        "status_dir": args.status_dir,
    }
    for name, knob in knobs():
        if command not in knob.commands:
            continue
        if hasattr(args, name):  # the command took this flag (and a retired one was given)
            value = getattr(args, name)
            if value_type(name) is tuple:
                value = _items(value)
            values[name] = value
            if knob.flag is None:
                print(
                    f"warning: {knob.old_flag} is deprecated; set {env_name(name)} instead "
                    f"(see {SETTINGS_DOC})",
                    file=sys.stderr,
                )
        elif knob.tuning and env.get(env_name(name), "").strip():
            values[name] = from_env(name, knob, env[env_name(name)])
    try:
        settings = Settings(**values)  # type: ignore[arg-type]
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    check_preemption_source(settings)
    return settings


def from_env(name: str, knob: Knob, text: str) -> object:
    """A tuning knob's value from its variable, checked by the knob; a usage error naming the
    variable otherwise."""
    var = env_name(name)
    kind = value_type(name)
    text = text.strip()
    value: object
    try:
        if kind is bool:
            if text.lower() not in TRUE + FALSE:
                raise ValueError
            value = text.lower() in TRUE
        elif kind is tuple:
            value = _items([text])
        elif kind is Path:
            value = Path(text)
        else:
            value = kind(text)
    except ValueError:
        what = {bool: "true or false", int: "a whole number", float: "a number"}.get(kind)
        raise CliError(f"{var} must be {what}, not {text!r}", EXIT_USAGE) from None
    problem = knob.problem(name, value, label=var)
    if problem is not None:
        raise CliError(problem, EXIT_USAGE)
    return value


# The settings that the queue file's `preemption:` block sets per queue; with a queue file,
# the block is the one place for them (no rules that merge the two).
PREEMPTION_BLOCK = {
    "preemption": "withinQueue",
    "preemption_grace_seconds": "gracePeriodSeconds",
    "preemption_min_runtime_seconds": "minRuntimeSeconds",
    "preemption_min_preemptor_priority": "minPreemptorPriority",
    "preemption_max_per_task": "maxPerTask",
}


def check_preemption_source(settings: Settings) -> None:
    """With a queue file, a preemption setting given as a flag or variable is a usage error
    naming the file and the field to set there instead."""
    path = config_path(settings.tasks_dir, settings.queues_path)
    if not path.is_file():
        return
    for name, block_field in PREEMPTION_BLOCK.items():
        if getattr(settings, name) != PlannerSettings.__dataclass_fields__[name].default:
            knob = Settings.__dataclass_fields__[name].metadata["knob"]
            given = knob.flag or f"{knob.old_flag} / {env_name(name)}"
            raise CliError(
                f"{given}: preemption is configured in {path} (preemption.{block_field} of "
                "each queue or of `default`); the preemption flags are only for a folder "
                "without a queue file",
                EXIT_USAGE,
            )


def _items(given: object) -> tuple[str, ...]:
    """`--x a,b --x c` -> ("a", "b", "c"); blanks dropped."""
    texts = given if isinstance(given, list | tuple) else [given]
    return tuple(item.strip() for text in texts for item in str(text).split(",") if item.strip())
