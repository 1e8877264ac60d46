"""Who may start: the admission policies (strict, backfill, best effort) and their walks, array
caps, and why a task waits (its lack, in words). The pass's admission stage that runs them is
`reconciler.core.admit`."""

from __future__ import annotations

from reconciler.core.admission.policies import (
    POLICIES,
    Admission,
    Candidate,
    Claim,
    Policy,
    WalkTail,
)
from reconciler.core.admission.waits import Lack, Waiting

__all__ = [
    "POLICIES",
    "Admission",
    "Candidate",
    "Claim",
    "Lack",
    "Policy",
    "Waiting",
    "WalkTail",
]
