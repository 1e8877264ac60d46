"""One task's own life in a pass: its state machine and transitions, following its run,
retries, dependencies, explicit id claims and what it asks of Ray.

Its public names are exported here lazily (on first use), so importing any one of its modules
runs none of the others: the packages of the core import one another's modules.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconciler.core.task.dependencies import RunView
    from reconciler.core.task.depnames import DependencyViews
    from reconciler.core.task.jobs import bundles_of, claim_of, request_of, submit_request
    from reconciler.core.task.lifecycle import TRANSITIONS, IllegalTransition, State, Trigger
    from reconciler.core.task.reconcile import reconcile_task
    from reconciler.core.task.retries import RetryPolicy
    from reconciler.core.task.step import (
        InUse,
        QueueKey,
        TaskEnv,
        TaskResult,
        TaskStep,
        Waiter,
        task_env,
    )

__all__ = [
    "TRANSITIONS",
    "DependencyViews",
    "IllegalTransition",
    "InUse",
    "QueueKey",
    "RetryPolicy",
    "RunView",
    "State",
    "TaskEnv",
    "TaskResult",
    "TaskStep",
    "Trigger",
    "Waiter",
    "bundles_of",
    "claim_of",
    "reconcile_task",
    "request_of",
    "submit_request",
    "task_env",
]

_MODULE_OF = {
    "RunView": "dependencies",
    "DependencyViews": "depnames",
    "bundles_of": "jobs",
    "claim_of": "jobs",
    "request_of": "jobs",
    "submit_request": "jobs",
    "TRANSITIONS": "lifecycle",
    "IllegalTransition": "lifecycle",
    "State": "lifecycle",
    "Trigger": "lifecycle",
    "reconcile_task": "reconcile",
    "RetryPolicy": "retries",
    "InUse": "step",
    "QueueKey": "step",
    "TaskEnv": "step",
    "TaskResult": "step",
    "TaskStep": "step",
    "Waiter": "step",
    "task_env": "step",
}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
