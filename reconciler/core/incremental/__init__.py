"""The planner, incrementally: the same plan as a full pass, redoing only what changed since
the last one. `plan_incremental` is the one entry every caller plans with (the loop, the
simulator, `rayqueue plan`); `planner.plan` is the reference it is tested against."""

from reconciler.core.incremental.memo import EMPTY, Memo, plan_incremental

__all__ = ["EMPTY", "Memo", "plan_incremental"]
