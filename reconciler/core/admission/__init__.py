"""Who may start: the admission policies (strict, backfill, best effort) and their walks, array
caps, and why a task waits (its lack, in words). The pass's admission stage that runs them is
`reconciler.core.admit`.

Its public names are exported here lazily (on first use), so importing any one of its modules
runs none of the others: the packages of the core import one another's modules.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reconciler.core.admission.policies import POLICIES, Admission, Candidate, Claim, Policy
    from reconciler.core.admission.waits import Lack, Waiting

__all__ = [
    "POLICIES",
    "Admission",
    "Candidate",
    "Claim",
    "Lack",
    "Policy",
    "Waiting",
]

_MODULE_OF = {
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
