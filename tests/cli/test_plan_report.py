"""`rayqueue plan`'s report, without Ray: what would be preempted, for whom, and why."""

from __future__ import annotations

from reconciler.cli.plan import report
from tests.support.planner_world import task
from tests.unit.core.preemption.test_reclaim import borrowed_world


def test_would_preempt_names_reclaim_victims_the_preemptor_and_why() -> None:
    w = borrowed_world()
    w.specs["team-a/x"] = task(0, 2)
    before = dict(w.statuses)
    inputs = w.inputs()
    text = report(w.step(), inputs, before)
    section = text.split("Would preempt (2):", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in section.splitlines()[2:] if line.strip()]
    assert [row.split()[:3] for row in rows] == [
        ["team-b/b0", "team-a/x", "Reclaim:"],
        ["team-b/b1", "team-a/x", "Reclaim:"],
    ]
    assert "taking back the quota team-b borrowed" in rows[0]
    assert "Would stop (2):" in text
    waiting = text.split("Waiting", 1)[1]
    assert "team-a/x" in waiting and "Preempting: preempting lent quota of team-b/b0" in waiting
