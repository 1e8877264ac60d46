"""The simulator: a workload (synthetic or an SWF trace) played through the planner's one
path (`core.incremental.plan_incremental`) against a simulated cluster and clock, to measure
scheduling rules without Ray."""

from reconciler.sim.engine import JobRecord, SimResult, simulate
from reconciler.sim.workload import Job, read_swf, synthetic

__all__ = ["Job", "JobRecord", "SimResult", "read_swf", "simulate", "synthetic"]
