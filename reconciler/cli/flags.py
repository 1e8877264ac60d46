"""Command-line flags derived from the Settings declaration, and Settings built back from them.

Each knob in specs/settings.py names its flag, help text and the commands that take it; this
module only walks that declaration. Ranges are checked by Settings itself when it is built,
so the flag and the code path refuse a bad value with the same message.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from reconciler.cli.common import EXIT_USAGE, CliError, tasks_dir
from specs.settings import Knob, Settings, address_from_env, knobs, value_type


def add_setting_flags(
    parser: argparse.ArgumentParser,
    command: str,
    *,
    choices: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Add a flag for every knob `command` takes. `choices` limits knobs by name (the policy
    names live in reconciler.core.policies, which specs may not import)."""
    for name, knob in knobs():
        if knob.flag is None or command not in knob.commands:
            continue
        _add_flag(parser, name, knob, (choices or {}).get(name))


def _add_flag(
    parser: argparse.ArgumentParser, name: str, knob: Knob, choices: Sequence[str] | None
) -> None:
    default = Settings.__dataclass_fields__[name].default
    kind = value_type(name)
    assert knob.flag is not None
    if kind is bool:
        # A flag switches the default: --standby turns it on, --no-api turns it off.
        action = "store_false" if default else "store_true"
        parser.add_argument(knob.flag, action=action, dest=name, help=knob.help)
        return
    if kind is tuple:
        # Repeated or comma-separated; argparse copies the list default before appending.
        parser.add_argument(
            knob.flag, action="append", default=[], dest=name, help=knob.help, metavar=knob.metavar
        )
        return
    extra: dict[str, object] = {}
    if kind is not str:
        extra["type"] = kind
    if choices is not None:
        extra["choices"] = tuple(choices)
    if knob.metavar is not None:
        extra["metavar"] = knob.metavar
    parser.add_argument(knob.flag, default=default, dest=name, help=knob.help, **extra)  # type: ignore[arg-type]


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from the folder and address options and every knob flag that was parsed.

    A value Settings refuses is a usage error (exit 2) with Settings' own message.
    """
    values: dict[str, object] = {
        "tasks_dir": tasks_dir(args.dir),
        "address": getattr(args, "address", None) or address_from_env(),
        "status_dir": args.status_dir,
    }
    for name, knob in knobs():
        if knob.flag is not None and hasattr(args, name):  # the command took this flag
            value = getattr(args, name)
            if value_type(name) is tuple:
                value = _items(value)
            values[name] = value
    try:
        return Settings(**values)  # type: ignore[arg-type]
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _items(given: Sequence[str]) -> tuple[str, ...]:
    """`--x a,b --x c` -> ("a", "b", "c"); blanks dropped."""
    return tuple(item.strip() for text in given for item in text.split(",") if item.strip())
