"""Charging what Ray says each job holds (reconciler/core/charges.py), as properties over
random clusters and histories:

- admission never starts more than what Ray reports available leaves, once the runs Ray's
  holdings do not show yet are taken from it (and what the jobs that ended since held is
  given back);
- when every job keeps its word (it holds no more than it declares, and Ray's report is what
  the holdings leave), every plan is the plan without any holdings or report;
- the incremental planner equals the full one while holdings and Ray's report change between
  passes (the memo sees a change of what a run holds as a change).

`RAYQUEUE_PROPERTY_EXAMPLES` sets how many examples each runs (default 200).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.planner import Observation, plan
from reconciler.core.task.jobs import claim_of
from specs.cluster import META_QUEUE, PENDING, RUNNING, SUCCEEDED, Capacity, RayJob
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from tests.support.incremental_history import History, assert_identical
from tests.support.planner_world import GIB, PlanWorld, task
from tests.unit.core.incremental.test_histories import (
    MANY,
    MANY_TEAMS,
    NAMES,
    QUEUES,
    SCALINGS,
    options_of,
    plain_specs_of,
    steps,
    team_queues,
)

EXAMPLES = int(os.environ.get("RAYQUEUE_PROPERTY_EXAMPLES", "200"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CAPACITY = Capacity(12, 0, 64 * GIB)
DECLARED = (0.5, 1, 1, 2, 3)
TEAMS = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 6}
    - name: team-b
      nominalQuota: {cpu: 4}
      preemption: {withinQueue: LowerPriority, reclaimWithinCohort: Any}
"""
FOLDERS = ("", "team-a/", "team-b/")


@dataclasses.dataclass(frozen=True)
class Drawn:
    """A cluster drawn: runs submitted (some started), then tasks that queue behind them."""

    options: PlanOptions
    queues: QueueConfig | None
    runs: list[tuple[str, float, int]]  # name, declared CPUs, priority
    started: list[bool]  # by run: Ray runs it (else it stays PENDING)
    queued: list[tuple[str, float, int]]


@st.composite
def clusters(draw: st.DrawFn) -> Drawn:
    teams = draw(st.booleans())
    options = PlanOptions(
        queue_id="q",
        policy=draw(st.sampled_from(["strict", "backfill", "besteffort"])),
        preemption=draw(st.sampled_from(["Never", "LowerPriority"])),
        max_inflight=draw(st.sampled_from([2, 100])),
        count_foreign_jobs=draw(st.booleans()),
    )
    count = draw(st.integers(1, 6))
    runs = [
        (
            f"{draw(st.sampled_from(FOLDERS))}r{i}",
            draw(st.sampled_from(DECLARED)),
            draw(st.integers(0, 3)),
        )
        for i in range(count)
    ]
    started = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    queued = [
        (
            f"{draw(st.sampled_from(FOLDERS))}q{i}",
            draw(st.sampled_from(DECLARED)),
            draw(st.integers(0, 9)),
        )
        for i in range(draw(st.integers(1, 8)))
    ]
    return Drawn(options, parse_queue_config(TEAMS) if teams else None, runs, started, queued)


def submitted(drawn: Drawn) -> PlanWorld:
    """The runs submitted and those drawn started in Ray, each pass applied."""
    w = PlanWorld(
        {name: task(priority, cpu, timeoutSeconds=600) for name, cpu, priority in drawn.runs},
        capacity=CAPACITY,
        options=drawn.options,
        queues=drawn.queues,
    )
    w.step()
    for (name, _, _), run in zip(drawn.runs, drawn.started, strict=True):
        if run and name in w.statuses and w.status(name).submission_id is not None:
            w.ray(name, RUNNING)
    w.step()
    for name, cpu, priority in drawn.queued:
        w.specs[name] = task(priority, cpu, timeoutSeconds=60)
    return w


def ours_live(w: PlanWorld) -> dict[str, RayJob]:
    return {
        sid: job
        for sid, job in w.jobs.items()
        if not job.terminal and job.metadata.get(META_QUEUE) == w.options.queue_id
    }


@SETTINGS
@given(
    drawn=clusters(),
    holds=st.lists(st.one_of(st.none(), st.sampled_from([0, 0.5, 1, 2, 4, 8])), max_size=6),
    ended=st.lists(st.booleans(), max_size=6),
    available=st.sampled_from([0, 0.5, 1, 2, 3, 5, 8, 12]),
    foreign=st.one_of(st.none(), st.sampled_from([0, 1, 3])),
    driver=st.one_of(st.none(), st.sampled_from([1, 2])),
)
def test_admission_never_starts_more_than_ray_reports_available(
    drawn: Drawn,
    holds: list[float | None],
    ended: list[bool],
    available: float,
    foreign: float | None,
    driver: float | None,
) -> None:
    """What admission starts in a pass, with the runs Ray's holdings do not show yet, fits in
    what Ray reports available and what the jobs that ended since held, whatever the jobs
    hold (more or less than they declare) and whatever Ray reports."""
    w = submitted(drawn)
    live = sorted(ours_live(w))
    for sid, held in zip(live, holds, strict=False):
        if held is not None:
            w.held[sid] = Capacity(held, 0, 0)
    if foreign is not None:
        w.jobs["raysubmit_f"] = RayJob("raysubmit_f", RUNNING, entrypoint_cpus=1)
        w.held["raysubmit_f"] = Capacity(foreign, 0, 0)
    if driver is not None:
        w.held["02000000"] = Capacity(driver, 0, 0)
    w.ray_available = Capacity(available, 0, 64 * GIB)
    # Jobs that ended after Ray was read: what they held is free in fact.
    given_back = 0.0
    for sid, end in zip(live, ended, strict=False):
        if end:
            w.jobs[sid] = dataclasses.replace(w.jobs[sid], status=SUCCEEDED, end_time=0.0)
            given_back += w.held[sid].cpu if sid in w.held else 0.0
    before = dict(w.statuses)
    unseen = sum(claim_of(job).cpu for sid, job in ours_live(w).items() if sid not in w.held)
    p = w.step()
    starts = [
        s for s in p.submits if s.task not in before or not before[s.task].status.phase.active
    ]
    asked = sum(float(s.request.metadata["rayqueue.cpu"]) for s in starts)
    if starts:
        assert asked + unseen <= available + given_back + 1e-9, (asked, unseen, given_back)


@SETTINGS
@given(
    drawn=clusters(),
    shares=st.lists(st.one_of(st.none(), st.sampled_from([0, 0.25, 0.5, 1])), max_size=6),
    foreign=st.one_of(st.none(), st.sampled_from([0, 0.5, 1])),
    passes=st.integers(1, 3),
)
def test_every_plan_is_the_same_when_every_job_keeps_its_word(
    drawn: Drawn, shares: list[float | None], foreign: float | None, passes: int
) -> None:
    """Each job holds at most what it declares (a share of it; None: not observed), a job not
    ours at most what it reserved, and is counted by it; Ray reports available what the
    holdings leave: every plan equals the plan without holdings and report, pass after
    pass, in every field."""
    w = submitted(drawn)
    options = drawn.options
    if foreign is not None:
        reserved = 1.0 if options.count_foreign_jobs else 0.0
        w.jobs["raysubmit_f"] = RayJob("raysubmit_f", RUNNING, entrypoint_cpus=reserved)
        w.held["raysubmit_f"] = Capacity(foreign * reserved, 0, 0)
    for _ in range(passes):
        for sid, share in zip(sorted(ours_live(w)), shares, strict=False):
            if share is not None:
                w.held[sid] = Capacity(claim_of(w.jobs[sid]).cpu * share, 0, 0)
        holding = sum(
            (h for sid, h in w.held.items() if sid in w.jobs and not w.jobs[sid].terminal),
            Capacity(),
        )
        w.ray_available = CAPACITY - holding
        inputs, statuses = w.inputs(), dict(w.statuses)
        bare = Observation(dict(w.jobs), w.capacity)
        today = plan(inputs, statuses, bare, w.now, options, queues=w.queues)
        charged = w.step()
        assert_identical(today, charged, statuses)
        for sid, job in list(w.jobs.items()):  # Ray starts what was submitted
            if job.status == PENDING:
                w.jobs[sid] = dataclasses.replace(job, status=RUNNING)


@st.composite
def hold_steps(draw: st.DrawFn) -> tuple[Any, ...]:
    """What Ray says jobs hold changes: a live job's holdings, a job no longer shown, a driver
    Ray lists no job for, Ray's report of what is available; and time passes, so runs held
    over are flagged `Overusing` and, under `overuse: Stop`, stopped."""
    kind = draw(st.sampled_from(["hold", "hold", "hold", "unhold", "holder", "report", "tick"]))
    if kind == "tick":  # long enough for a run held over to be flagged, then stopped
        return (kind, draw(st.sampled_from([15, 31])))
    if kind == "hold":
        return (kind, draw(st.integers(0, 7)), draw(st.sampled_from([0, 0.5, 1, 2, 3, 6])))
    if kind == "unhold":
        return (kind, draw(st.integers(0, 7)))
    if kind == "holder":
        return (kind, draw(st.integers(0, 1)), draw(st.sampled_from([0, 1, 3])))
    return (kind, draw(st.sampled_from([None, 0, 1, 2, 4, 6])))


@SETTINGS
@given(
    options=options_of(),
    with_queues=st.booleans(),
    grows=st.sampled_from(SCALINGS),
    history=st.lists(
        st.tuples(st.one_of(steps(), hold_steps()), st.sets(st.sampled_from(NAMES), max_size=2)),
        min_size=1,
        max_size=50,
    ),
)
def test_incremental_plan_equals_full_plan_while_holdings_change(
    options: PlanOptions,
    with_queues: bool,
    grows: Any,
    history: list[tuple[tuple[Any, ...], set[str]]],
) -> None:
    queues = parse_queue_config(QUEUES) if with_queues else None
    world = History(options, queues, scaling=grows)
    for step, failing in history:
        world.apply(step)
        world.fail_once = frozenset(failing)
        world.run_pass()
        if step[0] == "tick":
            world.run_pass()


TOTALS = {"passes": 0, "fast": 0}


@SETTINGS
@given(
    policy=st.sampled_from(["strict", "backfill", "besteffort"]),
    exact=st.sampled_from([1, 2, 3]),
    inflight=st.sampled_from([1, 2, 8]),
    tell=st.booleans(),
    teams=st.one_of(st.none(), team_queues()),
    data=st.data(),
)
def test_the_fast_pass_equals_the_full_plan_while_holdings_change(
    policy: str,
    exact: int,
    inflight: int,
    tell: bool,
    teams: tuple[QueueConfig, Any] | None,
    data: st.DataObject,
) -> None:
    """Many waiting tasks in one queue, or over team queues: the fast pass runs, and a run's
    holdings changing (nothing else) must move the queues as the full pass moves them."""
    names = MANY if teams is None else MANY_TEAMS
    start = data.draw(
        st.lists(st.tuples(st.sampled_from(names), plain_specs_of("x")), min_size=8, max_size=30)
    )
    history = data.draw(
        st.lists(
            st.tuples(
                st.one_of(
                    steps(names, plain_specs_of).filter(lambda s: s[0] != "scaling"),
                    hold_steps(),
                    hold_steps(),
                ),
                st.sets(st.sampled_from(names), max_size=2),
            ),
            min_size=1,
            max_size=40,
        )
    )
    options = PlanOptions(
        queue_id="q",
        policy=policy,
        exact_queue_positions=exact,
        max_inflight=inflight,
        lost_grace_seconds=5.0,
        start_timeout_seconds=10.0,
    )
    queues, past = teams if teams is not None else (None, None)
    world = History(options, queues, past, tell_changed=tell, every_field=True)
    world.check = assert_identical
    for name, fields in start:
        world.apply(("put", name, fields))
    world.run_pass()
    for step, failing in history:
        world.apply(step)
        world.fail_once = frozenset(failing)
        world.run_pass()
        if step[0] == "tick":
            world.run_pass()
    TOTALS["passes"] += world.passes
    TOTALS["fast"] += world.fast_passes


def test_the_fast_pass_words_a_wait_anew_when_another_job_over_holds() -> None:
    """Two jobs not ours swap what they hold: the free room and the claims stay the same, the
    largest over-holder a waiting task names does not (the walk is not reused)."""
    options = PlanOptions(queue_id="q", policy="strict", exact_queue_positions=3)
    world = History(options, None, capacity=Capacity(8, 0, 16 * GIB), every_field=True)
    world.check = assert_identical
    for i in range(12):
        world.apply(("put", f"t{i:02d}", {"cpu": 2, "timeoutSeconds": 50}))
    world.apply(("foreign", 1))
    world.apply(("foreign", 2))
    world.run_pass()
    world.held = {"foreign-1": Capacity(3, 0, 0), "foreign-2": Capacity(1, 0, 0)}
    world.run_pass()
    world.run_pass()
    world.held = {"foreign-1": Capacity(1, 0, 0), "foreign-2": Capacity(3, 0, 0)}
    before = world.fast_passes
    world.run_pass()
    assert world.fast_passes == before + 1
    said = {s.status.message for s in world.statuses.values()}
    assert any(m and "job foreign-2 holds 3 CPU" in m for m in said), said
