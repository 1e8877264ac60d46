"""Who starts in a pass: dependency gates, the admission policies (strict, backfill,
best effort), array caps, and why everyone else waits.

Its public names are exported here lazily (on first use), so importing any one of its modules
runs none of the others: the packages of the core import one another's modules.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconciler.core.admission.admit import (
        Admitted,
        QueueShares,
        Start,
        admission_of,
        far_message,
        position_bucket,
        start_task,
    )
    from reconciler.core.admission.gates import Gated, gate_dependencies
    from reconciler.core.admission.policies import POLICIES, Admission, Candidate, Claim, Policy
    from reconciler.core.admission.waits import Lack, Waiting

__all__ = [
    "POLICIES",
    "Admission",
    "Admitted",
    "Candidate",
    "Claim",
    "Gated",
    "Lack",
    "Policy",
    "QueueShares",
    "Start",
    "Waiting",
    "admission_of",
    "far_message",
    "gate_dependencies",
    "position_bucket",
    "start_task",
]

_MODULE_OF = {
    "Admitted": "admit",
    "QueueShares": "admit",
    "Start": "admit",
    "admission_of": "admit",
    "far_message": "admit",
    "position_bucket": "admit",
    "start_task": "admit",
    "Gated": "gates",
    "gate_dependencies": "gates",
    "POLICIES": "policies",
    "Admission": "policies",
    "Candidate": "policies",
    "Claim": "policies",
    "Policy": "policies",
    "Lack": "waits",
    "Waiting": "waits",
}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
