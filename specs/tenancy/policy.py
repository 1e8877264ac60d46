"""A token's limits, from its entry in the team tokens file: what it may put in a spec, what it
may read, how many tasks it may hold and how often it may call.

    - name: team-a-ci
      sha256: ...
      role: write
      folders: [team-a]
      maxPriority: 5               # 0..9; default 9
      allowNonPreemptible: false   # may it write `preemptible: false`? default: admin only
      forbiddenEnvVars: [AWS_PROFILE]  # write tokens always add RAY_JOB_STOP_WAIT_TIME_S
      read: own                    # own|all; default own for write, all for read and admin
      maxTasks: 200                # tasks its folders may hold (counted at each create)
      requestsPerMinute: 120       # every request, reads too; over it: 429 with Retry-After

The single admin token ($RAYQUEUE_API_TOKEN, --token-file) and the anonymous caller are
UNRESTRICTED. The checks here are pure: a spec in, the broken rule's words out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specs.task.quantity import plural
from specs.task.records import Task

STOP_WAIT_ENV = "RAY_JOB_STOP_WAIT_TIME_S"
"""Ray's grace between SIGTERM and SIGKILL: the queue's (gracePeriodSeconds), never a team's."""

POLICY_KEYS = frozenset(
    {
        "maxPriority",
        "allowNonPreemptible",
        "forbiddenEnvVars",
        "read",
        "maxTasks",
        "requestsPerMinute",
    }
)
_WRITE_KEYS = ("maxPriority", "allowNonPreemptible", "forbiddenEnvVars", "maxTasks")
_MAX_COUNT = 10**9
_SOURCE = "in the team tokens file"


class PolicyError(ValueError):
    """A policy value that cannot be used; the message names the key."""


@dataclass(frozen=True)
class Policy:
    max_priority: int = 9
    allow_non_preemptible: bool = True
    forbidden_env_vars: frozenset[str] = frozenset()
    read_all: bool = True  # False (`read: own`): only the tasks under the token's folders
    max_tasks: int | None = None
    requests_per_minute: int | None = None


UNRESTRICTED = Policy()


def parse_policy(raw: Mapping[str, Any], role: str, *, has_folders: bool) -> Policy:
    """The policy of one token entry (its other keys are ignored here). `role` is read, write
    or admin; `has_folders`: whether the entry lists folders (a `read: own` token needs them).
    """
    if role == "read":
        given = [k for k in _WRITE_KEYS if k in raw]
        if given:
            raise PolicyError(f"{', '.join(given)}: apply to write and admin tokens only")
    writer = role == "write"
    read = raw.get("read", "own" if writer else "all")
    if read not in ("own", "all"):
        raise PolicyError("read must be own or all")
    if read == "own" and role == "admin":
        raise PolicyError("read: own does not apply to an admin token (it reads configuration)")
    if read == "own" and not has_folders:
        raise PolicyError("read: own needs folders: [team-a, ...] (the folders it may read)")
    if read == "all" and role == "read" and has_folders:
        raise PolicyError("folders on a read token need read: own (they are what it may read)")
    forbidden = raw.get("forbiddenEnvVars", [])
    if not isinstance(forbidden, list) or not all(
        isinstance(v, str) and v and "=" not in v for v in forbidden
    ):
        raise PolicyError("forbiddenEnvVars must be a list of variable names")
    return Policy(
        max_priority=_integer(raw, "maxPriority", 0, 9, default=9),
        allow_non_preemptible=_boolean(raw, "allowNonPreemptible", default=not writer),
        forbidden_env_vars=frozenset(forbidden) | ({STOP_WAIT_ENV} if writer else set()),
        read_all=read == "all",
        max_tasks=_integer(raw, "maxTasks", 0, _MAX_COUNT, default=None),
        requests_per_minute=_integer(raw, "requestsPerMinute", 1, _MAX_COUNT, default=None),
    )


def _integer(raw: Mapping[str, Any], key: str, low: int, high: int, *, default: Any) -> Any:
    value = raw.get(key, default)
    if value is default:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise PolicyError(f"{key} must be a whole number from {low} to {high}")
    return value


def _boolean(raw: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise PolicyError(f"{key} must be true or false")
    return value


def _env_vars(task: Task | None) -> Mapping[str, Any]:
    runtime_env = task.spec.runtime_env if task is not None else None
    env_vars = (runtime_env or {}).get("env_vars")
    return env_vars if isinstance(env_vars, Mapping) else {}


def spec_violation(policy: Policy, new: Task, before: Task | None) -> str | None:
    """What `new` may not hold under `policy` ("may not ..."), or None. Only what this write
    changes is judged against `before` (the spec it replaces), so a team may still edit or
    suspend a task an admin raised above its own limits."""
    if new.spec.priority > policy.max_priority and (
        before is None or new.spec.priority > before.spec.priority
    ):
        return f"may not set priority above {policy.max_priority} (maxPriority {_SOURCE})"
    if (
        not new.spec.preemptible
        and not policy.allow_non_preemptible
        and (before is None or before.spec.preemptible)
    ):
        return f"may not set preemptible: false (allowNonPreemptible {_SOURCE})"
    env, old = _env_vars(new), _env_vars(before)
    for var in sorted(policy.forbidden_env_vars):
        if var in env and (var not in old or old[var] != env[var]):
            why = "the queue's gracePeriodSeconds sets it; " if var == STOP_WAIT_ENV else ""
            return f"may not set runtimeEnv.env_vars.{var} ({why}forbiddenEnvVars {_SOURCE})"
    return None


def task_limit_violation(policy: Policy, held: int) -> str | None:
    """Why one more task may not be created when the token's folders hold `held`, or None."""
    if policy.max_tasks is not None and held >= policy.max_tasks:
        return (
            f"may not hold more than {plural(policy.max_tasks, 'task')} in its folders, and "
            f"they hold {held} (maxTasks {_SOURCE}); delete finished ones first"
        )
    return None


__all__ = [
    "POLICY_KEYS",
    "STOP_WAIT_ENV",
    "UNRESTRICTED",
    "Policy",
    "PolicyError",
    "parse_policy",
    "spec_violation",
    "task_limit_violation",
]
