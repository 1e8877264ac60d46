"""The planner, incrementally: the same plan as a full pass, redoing only what changed since
the last one. `plan_incremental` is the one entry every caller plans with (the loop, the
simulator, `rayqueue plan`); `planner.plan` is the reference it is tested against. A caller
that lets a plan stand (`Stand`: the loop) has the pass whose inputs are those of the last
plan, or only its own writes of it, answered with that plan (standing.py)."""

from reconciler.core.incremental.memo import (
    EMPTY,
    Memo,
    Stand,
    plan_incremental,
    stands,
    without_standing,
)

__all__ = ["EMPTY", "Memo", "Stand", "plan_incremental", "stands", "without_standing"]
