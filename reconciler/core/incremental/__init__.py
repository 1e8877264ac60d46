"""The planner, incrementally: the same plan as a full pass, redoing only what changed since
the last one."""
