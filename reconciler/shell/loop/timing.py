"""When the loop passes next: the arithmetic of its waits, apart from the loop's state."""

from __future__ import annotations

from specs.settings.process import Settings

_JUST_AFTER = 0.001  # seconds past a plan's deadline: its answer changes right after it
_SHORTEST_WAIT = 0.01  # between two passes, whatever the deadline says
# While tasks wait for resources that running jobs hold, a job's end is only seen by asking Ray,
# and each second unseen is a second of cluster left idle. So Ray is asked at
# busy_interval_seconds right after a change, backing off to this share of the quiet time since
# (a queue behind one long job is asked about once a second, not ten times).
_WAITING_ON_RAY_SHARE = 0.05


def next_wait(
    settings: Settings,
    *,
    backlog: bool,
    waiting_on_ray: bool,
    quiet_for: float,
    deadline_in: float | None,
    elapsed: float,
) -> float:
    """Seconds until the next pass, after a pass that took `elapsed`. The last plan's
    deadline (`deadline_in` seconds away) says when its answer changes (controller-runtime's
    RequeueAfter): the loop wakes just after it. Ray's answer can change at any time and is
    seen only by asking, so a pass comes at least every interval, counted from the start of
    the last one. A `backlog` of deferred sidecars is written at busy_interval_seconds, and Ray
    is asked sooner while tasks wait on running jobs (`waiting_on_ray`; `quiet_for`: seconds
    since the last pass that changed something). File events wake the loop at once."""
    wait = settings.interval_seconds
    fast = settings.busy_interval_seconds
    if backlog:
        wait = min(wait, fast)
    if waiting_on_ray:
        wait = min(wait, max(fast, _WAITING_ON_RAY_SHARE * quiet_for))
    wait -= elapsed
    # At or before now: the plan read the clock itself (a time it wrote, a reserved start of
    # "now"), so it holds this instant only and no later instant is special.
    if deadline_in is not None and deadline_in > 0:
        wait = min(wait, deadline_in + _JUST_AFTER)
    return max(wait, _SHORTEST_WAIT)
