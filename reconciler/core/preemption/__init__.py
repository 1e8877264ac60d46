"""Preemption: each queue's rules, who may preempt whom (within a queue, reclaiming lent quota,
between sibling queues by share), and the cheapest set of victims. The pass records its
decisions in `reconciler.core.preemptions`."""

from __future__ import annotations

from reconciler.core.preemption.preempt import Decision, StoppingVictims, decide
from reconciler.core.preemption.rules import Setup
from reconciler.core.preemption.victims import Preemptor, QueueLoad, Rules, Running, Victim

__all__ = [
    "Decision",
    "Preemptor",
    "QueueLoad",
    "Rules",
    "Running",
    "Setup",
    "StoppingVictims",
    "Victim",
    "decide",
]
