"""Settings of one rayqueue process and of the planner: each knob declared once, with its flag,
its environment variable and its default."""
