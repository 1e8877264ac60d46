"""The pure core: specs, statuses, what Ray reports and `now` in; decisions out. No I/O, no
clock, no randomness (pyproject's `pure-core` import-linter contract)."""

from reconciler.core.incremental import Memo, plan_incremental
from reconciler.core.planner import Plan

__all__ = ["Memo", "Plan", "plan_incremental"]
