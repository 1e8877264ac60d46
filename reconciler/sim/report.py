"""The report of python -m reconciler.sim: the results table, team and user lines, durations."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.sim import teams as team_split
from reconciler.sim.metrics import URGENT_PRIORITY, Metrics
from reconciler.sim.workload import Job, offered_load

TABLE_LEVELS = (9, 5, 0)  # top, middle and bottom priority in the main table


def _team_lines(rows: Sequence[Metrics]) -> list[str]:
    lines = ["", "teams (weight-normalised CPU share while every team had waiting work):", ""]
    for m in rows:
        if m.team_shares is None:
            continue
        shares = ", ".join(f"{t} {v:.3f}" for t, v in m.team_shares.items())
        lines.append(
            f"- {m.policy}: Jain {m.jain_index:.3f}; {shares}; "
            f"contended {duration(m.contended_seconds or 0)}; utilization {m.utilization:.1%}; "
            f"lost {m.lost_cpu_hours:.1f} CPU-hours ({m.preemptions} preemptions)"
        )
        if m.offered is not None:
            lines.append(
                "  offered load, times its weight's share: "
                + " / ".join(f"{v:.2f}" for v in m.offered.values())
            )
        if m.delivered is not None:
            d = m.delivered
            run = d["run_shares"]
            hot = d["contended_shares"]
            waits = d["p95_wait"]
            started = d["started_shares"]
            assert isinstance(run, dict) and isinstance(hot, dict) and isinstance(waits, dict)
            assert isinstance(started, dict)
            lines.append(
                "  share of delivered CPU-hours, run: "
                + " / ".join(f"{v:.3f}" for v in run.values())
                + "; contended: "
                + " / ".join(f"{v:.3f}" for v in hot.values())
                + f"; weighted Jain {d['weighted_jain']:.3f}"
                + "; runs started contended, whole: "
                + " / ".join(f"{v:.3f}" for v in started.values())
                + f", weighted Jain {d['started_jain']:.3f}"
                + (
                    f"; sliding days ({d['windows']}): Jain min {d['window_jain_min']:.3f}, "
                    f"mean {d['window_jain_mean']:.3f}"
                    if d["windows"]
                    else ""
                )
                + "; p95 wait "
                + " / ".join(duration(float(v)) for v in waits.values())
            )
            quantiles = d.get("wait_quantiles")
            if isinstance(quantiles, dict) and quantiles:
                lines.append(
                    "  waits at "
                    + " / ".join(next(iter(quantiles.values())))
                    + ": "
                    + "; ".join(
                        f"{team} " + " / ".join(duration(float(v)) for v in q.values())
                        for team, q in quantiles.items()
                    )
                )
        if m.wide_waits is not None:
            lines += _wide_lines(m.wide_waits)
        if m.users is not None:
            lines += _user_lines(m.users)
        if m.reclaim is not None:
            r = m.reclaim
            regained = r["regained_at"]
            returned = r["returned_at"] or 0.0
            lines.append(
                f"  team-0 returned at {duration(returned)}, others then borrowed "
                f"{r['borrowed_at_return']:g} CPUs; nominal regained "
                + (f"{duration(regained - returned)} later" if regained is not None else "never")
                + f"; CPUs others borrowed meanwhile: {r['borrowed_meanwhile']:g}"
            )
        if m.late is not None:
            owed = m.late["expected_shares"]
            assert isinstance(owed, dict)
            start = m.late.get("means_at_arrival")
            lines.append(
                "  owed by the order once team-0 arrives (contended): "
                + " / ".join(f"{v:.3f}" for v in owed.values())
                + f"; weighted Jain against it {m.late['jain_vs_expected']:.3f}"
                + (
                    "; decayed mean shares then: " + " / ".join(f"{v:.3f}" for v in start.values())
                    if isinstance(start, dict)
                    else ""
                )
            )
    return lines


def _wide_lines(wide: dict[str, object]) -> list[str]:
    """Per team: p95 / longest wait of all its tasks and of its wide ones, and the passes."""
    teams = wide["teams"]
    overall = wide["all"]
    assert isinstance(teams, dict) and isinstance(overall, dict)

    def cell(name: str, w: dict[str, float]) -> str:
        return (
            f"{name} {duration(w['p95'])} / {duration(w['longest'])}, wide "
            f"{duration(w['wide_p95'])} / {duration(w['wide_longest'])} "
            f"({w['wide_passed']} of {w['wide']} passed by own later tasks, {w['passes']} passes)"
        )

    return [
        f"  waits p95 / longest, all and wide (at least {wide['wide_cpu']:g} CPUs, the widest "
        "10 %): " + "; ".join([*(cell(t, w) for t, w in teams.items()), cell("all", overall)])
    ]


def _user_lines(users: dict[str, object]) -> list[str]:
    """--tree: each user's share of delivered CPU-hours over the run, and within its team."""
    run = users["run_shares"]
    assert isinstance(run, dict)
    team_total: dict[str, float] = {}
    for user, value in run.items():
        team = team_split.team_of(user)
        team_total[team] = team_total.get(team, 0.0) + value
    within = ", ".join(
        f"{user} {value:.3f} ({value / team_total[team_split.team_of(user)]:.2f} of its team)"
        if team_total[team_split.team_of(user)]
        else f"{user} 0"
        for user, value in run.items()
    )
    jain = users["weighted_jain"]
    teams = users["within_teams"]
    assert isinstance(jain, float) and isinstance(teams, dict)
    split = "; ".join(
        f"{team} "
        + " / ".join(f"{v:.3f}" for v in got["contended_shares"].values())
        + f" (Jain {got['weighted_jain']:.3f}, {duration(got['contended_seconds'])})"
        for team, got in teams.items()
    )
    return [
        f"  users' share of delivered CPU-hours, run: {within}",
        f"  users' weighted Jain (every user waiting; due: team share x user share) {jain:.3f}",
        f"  users within each team, while all its users had work waiting: {split}",
    ]


def _real_use_lines(rows: Sequence[Metrics]) -> list[str]:
    """Jobs whose real use is not what they declare: what was held, declared and in fact, and
    what happened inside Ray (waits, priority inversions, timeouts)."""
    lines = [
        "",
        f"jobs that do not keep their word ({rows[0].misdeclared} of {rows[0].jobs}): held over "
        "capacity x makespan, declared / in fact; inside Ray:",
        "",
    ]
    for m in rows:
        lines.append(
            f"- {m.policy}: held {m.held_declared:.1%} / {m.held_in_fact:.1%}; "
            f"{m.ray_waited} jobs waited inside Ray; {m.inversions} inversions (top priority "
            f"passed over: {m.top_inverted:.1%}), {m.behind_lower} starts of lower priority "
            f"submitted earlier (top priority behind one: {m.top_behind_lower:.1%}); "
            f"{m.timed_out} timed out ({m.never_started} before Ray started them)"
        )
    return lines


def duration(seconds: float) -> str:
    """Compact and readable across six orders of magnitude: 8 s, 14 min, 3.2 h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def table(name: str, jobs: Sequence[Job], capacity: int, rows: Sequence[Metrics]) -> str:
    levels = "/".join(str(level) for level in TABLE_LEVELS)
    lines = [
        f"{name}: {len(jobs)} jobs, {capacity} CPUs, offered load "
        f"{offered_load(list(jobs), capacity):.2f}",
        "",
        f"| policy | utilization | p95 wait, priority {levels} | longest wait, priority "
        f"{TABLE_LEVELS[0]} | mean wait | mean bounded slowdown | longest wait |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in rows:
        p95 = " / ".join(
            duration(m.waits[level].p95) if level in m.waits else "-" for level in TABLE_LEVELS
        )
        lines.append(
            f"| {m.policy} | {m.utilization:.1%} | {p95} | {duration(m.top_longest_wait)} | "
            f"{duration(m.mean_wait)} | "
            f"{m.mean_bounded_slowdown:.1f} | {duration(m.longest_wait)} |"
        )
    all_levels = sorted({level for m in rows for level in m.waits}, reverse=True)
    lines += [
        "",
        "p95 (mean) wait by priority, and of wide jobs (at least half the cluster):",
        "",
        "| policy | " + " | ".join(str(level) for level in all_levels) + " | wide |",
        "|---|" + "---|" * (len(all_levels) + 1),
    ]
    for m in rows:
        cells = [
            f"{duration(m.waits[level].p95)} ({duration(m.waits[level].mean)})"
            if level in m.waits
            else "-"
            for level in all_levels
        ]
        cells.append(f"{duration(m.wide.p95)} ({duration(m.wide.mean)})" if m.wide.jobs else "-")
        lines.append(f"| {m.policy} | " + " | ".join(cells) + " |")
    lines += ["", f"priority {URGENT_PRIORITY} and up, and preemption:", ""]
    for m in rows:
        lines.append(
            f"- {m.policy}: p95 wait {duration(m.urgent.p95)}; {m.preemptions} preemptions, "
            f"at most {m.max_preemptions_per_job} of one job; wasted {m.wasted_fraction:.1%} "
            "of the CPU time run"
        )
    if any(m.misdeclared for m in rows):
        lines += _real_use_lines(rows)
    lines += ["", "planner cost:", ""]
    for m in rows:
        lines.append(
            f"- {m.policy}: {m.passes} passes, {m.pass_ms:.2f} ms/pass, "
            f"{m.task_us:.0f} us per live task per pass; simulation {m.wall_seconds:.1f} s"
            + (f"; {m.unfinished} jobs unfinished" if m.unfinished else "")
        )
    if any(m.team_shares is not None for m in rows):
        lines += _team_lines(rows)
    return "\n".join(lines)
