"""Settings of one rayqueue process and of the planner: each knob declared once, with its flag,
its environment variable and its default."""

from specs.settings.knobs import GROUPS, Knob, address_from_env, env_name
from specs.settings.planner import POLICY_NAMES, PREEMPTION_MODES, PlannerSettings, PlanOptions
from specs.settings.process import DEFAULT_PORT, Settings, knobs, value_type

__all__ = [
    "DEFAULT_PORT",
    "GROUPS",
    "POLICY_NAMES",
    "PREEMPTION_MODES",
    "Knob",
    "PlanOptions",
    "PlannerSettings",
    "Settings",
    "address_from_env",
    "env_name",
    "knobs",
    "value_type",
]
