"""Team queues: quotas, borrowing and lending, fair sharing with decayed usage, the queue tree,
and why each queue's tasks wait."""

from __future__ import annotations

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
