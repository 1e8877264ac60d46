"""Preemption: each queue's rules, who may preempt whom (within a queue, reclaiming lent quota,
between sibling queues by share), and the cheapest set of victims. The pass records its
decisions in `reconciler.core.preemptions`.

Its public names are exported here lazily (on first use), so importing any one of its modules
runs none of the others: the packages of the core import one another's modules.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

_MODULE_OF = {
    "Decision": "preempt",
    "decide": "preempt",
    "StoppingVictims": "preempt",
    "Setup": "rules",
    "Preemptor": "victims",
    "QueueLoad": "victims",
    "Rules": "victims",
    "Running": "victims",
    "Victim": "victims",
}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
