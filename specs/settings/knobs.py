"""The knob machinery of the settings: how a setting is given (its flag, or its RAYQUEUE_
environment variable), the groups and commands that take it, and the check of its values.

The settings themselves are declared in specs/settings/process.py (and the planner's in
specs/settings/planner.py), each field's metadata made by knob() here.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

# Which commands take a knob. `plan` plans with serve's planner and options, so it takes every
# option that decides what the planner does (it reads no git sources and does not confine
# runtimeEnv paths: see reconciler/cli/plan.py).
SERVE = ("serve",)
LOOP = ("serve", "plan")

# The groups a knob belongs to, in `serve --help` order, with their titles.
GROUPS = {
    "loop": "loop: the folder, Ray and the process",
    "api": "HTTP API and access",
    "planner": "planner: what a pass starts and stops",
}

ENV_PREFIX = "RAYQUEUE_"


def address_from_env(environ: dict[str, str] | None = None) -> str | None:
    """The legacy scheduler's RAY_DASHBOARD_ADDRESS first, then Ray's own RAY_ADDRESS."""
    env = os.environ if environ is None else environ
    return env.get("RAY_DASHBOARD_ADDRESS") or env.get("RAY_ADDRESS") or None


@dataclass(frozen=True)
class Knob:
    """How one setting is given (a flag, or the environment) and which values it accepts."""

    flag: str | None = None  # None: a tuning knob, read from RAYQUEUE_<NAME>
    help: str = ""
    commands: tuple[str, ...] = SERVE
    metavar: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None  # an exclusive minimum: the value must be greater
    choices: tuple[str, ...] | None = None
    group: str = "loop"
    old_flag: str | None = None  # a tuning knob's retired flag: accepted with a warning

    @property
    def tuning(self) -> bool:
        return self.flag is None

    def label(self, name: str) -> str:
        return self.flag or self.old_flag or name

    def problem(self, name: str, value: object, label: str | None = None) -> str | None:
        """Why `value` is refused, in words that name the flag (or `label`); None if fine."""
        label = label or self.label(name)
        if self.choices is not None and value is not None and value not in self.choices:
            return f"{label} must be one of {', '.join(self.choices)}, not {value!r}"
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        low, high = self.minimum, self.maximum
        if value != value:  # NaN compares false with everything, so it would pass the ranges
            return f"{label} must be a number, not {value}"
        if low is not None and high is not None and not low <= value <= high:
            return f"{label} must be between {low:g} and {high:g}, not {value:g}"
        if low is not None and value < low:
            return f"{label} must be at least {low:g}, not {value:g}"
        if high is not None and value > high:
            return f"{label} must be at most {high:g}, not {value:g}"
        if self.above is not None and not value > self.above:
            return f"{label} must be greater than {self.above:g}, not {value:g}"
        return None


def knob(
    help: str = "",
    *,
    flag: str | None = None,
    commands: tuple[str, ...] = SERVE,
    metavar: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    choices: tuple[str, ...] | None = None,
    group: str = "loop",
    old_flag: str | None = None,
) -> dict[str, Knob]:
    """The metadata of a Settings field: `field(default=..., metadata=knob(...))`."""
    if group not in GROUPS:
        raise ValueError(f"knob group {group!r} is not one of {', '.join(GROUPS)}")
    return {
        "knob": Knob(
            flag, help, commands, metavar, minimum, maximum, above, choices, group, old_flag
        )
    }


def env_name(name: str) -> str:
    """The environment variable of a tuning knob: RAYQUEUE_ and the field name in capitals."""
    return ENV_PREFIX + name.upper()


def check(obj: object) -> None:
    """Refuse a value its knob does not accept (ValueError naming the flag or field)."""
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        declared = f.metadata.get("knob")
        if isinstance(declared, Knob):
            problem = declared.problem(f.name, getattr(obj, f.name))
            if problem is not None:
                raise ValueError(problem)
