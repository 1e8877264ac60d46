"""One task's own life in a pass: its state machine and transitions, following its run,
retries, dependencies, explicit id claims and what it asks of Ray."""

from __future__ import annotations

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
