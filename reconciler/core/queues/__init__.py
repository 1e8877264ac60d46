"""Team queues: quotas, borrowing and lending, fair sharing with decayed usage, the queue tree,
and why each queue's tasks wait.

Its public names are exported here lazily (on first use), so importing any one of its modules
runs none of the others: the packages of the core import one another's modules.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconciler.core.queues.dispatch import (
        ConfigState,
        QueueAdmission,
        QueueSummary,
        admit_by_queue,
    )
    from reconciler.core.queues.quotas import QueueQuota, Share
    from reconciler.core.queues.shareresult import FairAdmission, QueueState
    from reconciler.core.queues.tree import QueueDemand, QueueNode
    from reconciler.core.queues.usage import QueueUsage

__all__ = [
    "ConfigState",
    "FairAdmission",
    "QueueAdmission",
    "QueueDemand",
    "QueueNode",
    "QueueQuota",
    "QueueState",
    "QueueSummary",
    "QueueUsage",
    "Share",
    "admit_by_queue",
]

_MODULE_OF = {
    "ConfigState": "dispatch",
    "QueueAdmission": "dispatch",
    "QueueSummary": "dispatch",
    "admit_by_queue": "dispatch",
    "QueueQuota": "quotas",
    "Share": "quotas",
    "FairAdmission": "shareresult",
    "QueueState": "shareresult",
    "QueueDemand": "tree",
    "QueueNode": "tree",
    "QueueUsage": "usage",
}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
