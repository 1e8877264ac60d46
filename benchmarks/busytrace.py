"""Why serve plans: a trace of every pass in the busy benchmark's window (`--trace`).

Patched into serve's process (`python -m benchmarks.busy --ray head --trace`): for each pass,
what woke it (a file event or the timer), what its read found changed (spec files, statuses,
Ray's jobs, capacity, a full walk) and whether the planner ran, was skipped as still, and what
its plan did. `summary` counts the planned passes by cause, per job that ended.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def install(out: Path, mark: Path) -> None:
    """Record each pass as a line of JSON in `out` once `mark` exists."""
    from reconciler.core import incremental
    from reconciler.shell.loop.runner import Reconciler
    from specs.folder.store import TaskStore

    sink = out.open("a")
    rec: dict[str, Any] = {}
    last: dict[str, Any] = {"jobs": None, "cap": None}

    init = Reconciler.__init__

    def patched_init(self: Reconciler, *a: Any, **k: Any) -> None:
        init(self, *a, **k)
        wait = self.wake.wait

        def traced_wait(timeout: float | None = None) -> bool:
            woke = wait(timeout)
            last["woke"] = "event" if woke else "timer"
            return woke

        self.wake.wait = traced_wait  # type: ignore[method-assign]

    Reconciler.__init__ = patched_init  # type: ignore[method-assign]

    run_pass = Reconciler.run_pass

    def traced_pass(self: Reconciler) -> Any:
        if not mark.exists():
            return run_pass(self)
        rec.clear()
        rec["t"] = time.time()
        rec["woke"] = last.get("woke")
        deadline = self._deadline
        rec["deadline_due"] = deadline is not None and deadline <= time.time()
        cpu = time.thread_time()
        try:
            return run_pass(self)
        finally:
            rec["cpu_ms"] = round(1000 * (time.thread_time() - cpu), 2)
            sink.write(json.dumps(rec) + "\n")
            sink.flush()

    Reconciler.run_pass = traced_pass  # type: ignore[method-assign]

    changed_paths = Reconciler._changed_paths

    def traced_changed(self: Reconciler) -> set[str] | None:
        paths = changed_paths(self)
        rec["paths"] = None if paths is None else len(paths)
        return paths

    Reconciler._changed_paths = traced_changed  # type: ignore[method-assign]

    observe = Reconciler.observe

    def traced_observe(self: Reconciler) -> Any:
        observed = observe(self)
        jobs: Mapping[str, Any] | None = observed.jobs
        before = last["jobs"]
        moves = []
        if jobs is not before and jobs is not None and before is not None:
            for sid in jobs.keys() | before.keys():
                old, new = before.get(sid), jobs.get(sid)
                if old != new:
                    moves.append(
                        f"{sid[-8:]}:{getattr(old, 'status', None)}>{getattr(new, 'status', None)}"
                    )
        rec["jobs_same_object"] = jobs is before
        rec["ray_moves"] = moves
        rec["cap_changed"] = observed.capacity != last["cap"]
        last["jobs"], last["cap"] = jobs, observed.capacity
        return observed

    Reconciler.observe = traced_observe  # type: ignore[method-assign]

    read_changes = TaskStore.read_status_changes

    def traced_read(self: TaskStore, *, cached: bool = False) -> Any:
        out = read_changes(self, cached=cached)
        rec["status_changes"] = None if out[2] is None else len(out[2])
        return out

    TaskStore.read_status_changes = traced_read  # type: ignore[method-assign]

    plan_incremental = incremental.plan_incremental

    def traced_plan(*a: Any, **k: Any) -> Any:
        plan, memo = plan_incremental(*a, **k)
        if memo.stood:  # the plan that stands: the pass is skipped (traced_skip), not planned
            return plan, memo
        rec["planned"] = True
        rec["plan_still"] = plan.still
        rec["submits"] = len(plan.submits)
        rec["writes"] = len(plan.write_classes)
        rec["changed_names"] = None if k.get("changed") is None else len(k["changed"])
        return plan, memo

    incremental.plan_incremental = traced_plan

    skip = Reconciler._skip

    def traced_skip(self: Reconciler, plan: Any, observed: Any) -> Any:
        rec["skipped"] = True
        return skip(self, plan, observed)

    Reconciler._skip = traced_skip  # type: ignore[method-assign]


def cause(r: Mapping[str, Any]) -> str:
    """What changed in a pass's inputs, as one word (the first that applies)."""
    if r.get("paths") is None:
        return "walk"
    if r.get("ray_moves"):
        return "ray"
    if r.get("paths"):
        return "spec"
    if r.get("status_changes"):
        return "own-status"
    if r.get("cap_changed"):
        return "capacity"
    if r.get("deadline_due"):
        return "deadline"
    return "other"


def summary(path: Path, ended: float) -> dict[str, Any]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    planned = [r for r in rows if r.get("planned")]
    by_cause = Counter(cause(r) for r in planned)
    moves = Counter(m.split(":", 1)[1] for r in planned for m in r.get("ray_moves", []) if ":" in m)
    return {
        "passes": len(rows),
        "planned": len(planned),
        "skipped_still": sum(1 for r in rows if r.get("skipped")),
        "woke_by_event": sum(1 for r in rows if r.get("woke") == "event"),
        "planned_by_cause": dict(by_cause),
        "planned_per_ended_job": {k: round(v / ended, 2) for k, v in by_cause.items()}
        if ended
        else {},
        "ray_moves_in_planned": dict(moves),
        "planned_still_plans": sum(1 for r in planned if r.get("plan_still")),
        "cpu_ms_planned": round(sum(r["cpu_ms"] for r in planned), 1),
        "cpu_ms_other": round(sum(r["cpu_ms"] for r in rows if not r.get("planned")), 1),
    }
