"""The incremental planner gives exactly `plan()`'s result, pass after pass, on random
histories; and a task whose inputs did not change costs no reconcile."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core import planner
from reconciler.core.planner import TaskInput
from reconciler.core.queues.usage import QueueUsage, Tracked
from reconciler.core.task import lifecycle
from specs.cluster import (
    FAILED,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    Capacity,
    NodeType,
    Scaling,
)
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.models import Phase
from tests.support.incremental_history import T0, History
from tests.support.planner_world import GIB

NAMES = ("a", "b", "c", "team-a/d", "team-a/e", "team-b/f")
QUEUES = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 3}
      overuse: Stop
      overuseGraceSeconds: 5
    - name: team-b
      nominalQuota: {cpu: 2}
      borrowingLimit: {cpu: 0}
      overuse: Warn
"""


TEAMS = ("team-a", "team-b", "team-c", "team-d")


@st.composite
def team_queues(draw: st.DrawFn) -> tuple[QueueConfig, QueueUsage | None]:
    """Several team queues: quotas, weights, borrowing limits, maxRunning, the
    fair-sharing mode; and each queue's decayed past use, when it counts."""
    count = draw(st.integers(2, 4))
    lines = ["apiVersion: rayqueue/v1", "kind: QueueConfig", "spec:"]
    mode = draw(st.sampled_from(["DecayedUsage", "CurrentUsage"]))
    half = draw(st.sampled_from(["1h", "7d"]))
    lines += ["  fairSharing:", f"    mode: {mode}", f"    usageHalfLife: {half}", "  queues:"]
    for team in TEAMS[:count]:
        lines += [f"    - name: {team}", f"      nominalQuota: {{cpu: {draw(st.integers(0, 3))}}}"]
        lines.append(f"      weight: {draw(st.sampled_from([0.5, 1, 1, 2]))}")
        if draw(st.booleans()):
            lines.append(f"      borrowingLimit: {{cpu: {draw(st.integers(0, 2))}}}")
        if draw(st.integers(0, 3)) == 0:
            lines.append(f"      maxRunning: {draw(st.integers(1, 2))}")
        overuse = draw(st.sampled_from([None, "Charge", "Warn", "Stop"]))
        if overuse is not None:
            lines.append(f"      overuse: {overuse}")
            lines.append(f"      overuseGraceSeconds: {draw(st.sampled_from([0, 5, 50]))}")
    config = parse_queue_config("\n".join(lines) + "\n")
    past: QueueUsage | None = None
    if draw(st.booleans()):
        cpus = draw(
            st.lists(st.sampled_from([0, 10, 3600, 90_000]), min_size=count, max_size=count)
        )
        since = T0 - draw(st.sampled_from([60.0, 86_400.0]))
        past = Tracked(
            {t: Capacity(c, 0, 0) for t, c in zip(TEAMS[:count], cpus, strict=True)}, since
        )
    return config, past


RETRY = {"limit": 2, "backoffSeconds": 7, "on": ["Failed", "TimedOut", "Lost"]}
# What the cluster may grow to: none, 2-CPU nodes up to 8 CPU, the same with a
# node pending and a failure, or a bare configured ceiling.
SMALL = NodeType("small", Capacity(2, 0, 8 * GIB), max_count=3)
SCALINGS = (
    None,
    Scaling(Capacity(8, 0, 32 * GIB), (SMALL,)),
    Scaling(Capacity(8, 0, 32 * GIB), (SMALL,), "autoscaler", ("small",), ("quota",)),
    Scaling(Capacity(6, 1, 16 * GIB)),
)


@st.composite
def specs_of(draw: st.DrawFn, name: str) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "priority": draw(st.integers(0, 3)),
        "cpu": draw(st.sampled_from([1, 1, 2, 3, 9])),  # 9: more than any capacity drawn
        "timeoutSeconds": draw(st.sampled_from([0, 0, 5, 50])),
        "preemptible": draw(st.booleans()),
    }
    if draw(st.booleans()):
        fields["retry"] = RETRY
    if draw(st.integers(0, 9)) == 0:
        fields["suspend"] = True
    if draw(st.integers(0, 3)) == 0:
        # Explicit ids, some claimed by several tasks: the claim rule
        # (reconciler.core.task.idclaims).
        fields["submissionId"] = draw(st.sampled_from(["shared", "shared", "shared-2", name[-1]]))
    if draw(st.integers(0, 4)) == 0:
        fields["dependsOn"] = [{"name": draw(st.sampled_from([n for n in NAMES if n != name]))}]
    return fields


@st.composite
def plain_specs_of(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """Tasks the fast pass takes (reconciler.core.incremental.keptorder): no dependencies, no
    explicit
    submission id."""
    fields: dict[str, Any] = {
        "priority": draw(st.integers(0, 2)),
        "cpu": draw(st.sampled_from([1, 1, 1, 2, 3, 9])),
        "timeoutSeconds": draw(st.sampled_from([0, 0, 5, 50])),
    }
    if draw(st.booleans()):
        fields["retry"] = RETRY
    if draw(st.integers(0, 9)) == 0:
        fields["suspend"] = True
    return fields


@st.composite
def steps(
    draw: st.DrawFn, names: tuple[str, ...] = NAMES, spec_of: Any = specs_of
) -> tuple[Any, ...]:
    kind = draw(
        st.sampled_from(
            [
                *("put", "put", "touch", "break", "delete", "ray", "ray", "ray", "rebuild"),
                *("tick", "tick", "tick", "capacity", "outage", "foreign", "scaling"),
                *("lose_writes", "lose_writes"),
                "restart",
            ]
        )
    )
    name = draw(st.sampled_from(names))
    if kind == "put":
        return (kind, name, draw(spec_of(name)))
    if kind == "ray":
        outcome = draw(st.sampled_from([RUNNING, RUNNING, SUCCEEDED, FAILED, STOPPED, "vanish"]))
        return (kind, draw(st.integers(0, 7)), outcome, draw(st.sampled_from([1, 2, 3])))
    if kind == "tick":
        return (kind, draw(st.sampled_from([0, 0.25, 1, 3, 4.999, 5, 6, 7, 30, 61, 301, 3600])))
    if kind == "capacity":
        return (kind, draw(st.sampled_from([2, 4, 6])))
    if kind == "outage":
        return (kind, draw(st.booleans()))
    if kind == "scaling":
        return (kind, draw(st.sampled_from(SCALINGS)))
    if kind == "foreign":
        return (kind, draw(st.integers(0, 1000)))
    if kind == "lose_writes":
        # A status file that cannot be written for a while: the next passes get the old one.
        lost = frozenset(draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)))
        return (kind, lost, draw(st.sampled_from([1, 3, 10])))
    return (kind, name)


@st.composite
def options_of(draw: st.DrawFn) -> PlanOptions:
    return PlanOptions(
        queue_id="q",
        policy=draw(st.sampled_from(["strict", "backfill", "besteffort"])),
        preemption=draw(st.sampled_from(["Never", "LowerPriority"])),
        preemption_min_runtime_seconds=draw(st.sampled_from([0.0, 30.0])),
        max_inflight=draw(st.sampled_from([1, 8])),
        start_timeout_seconds=draw(st.sampled_from([10.0, 100.0])),
        lost_grace_seconds=draw(st.sampled_from([5.0, 60.0])),
        ray_history_retention_seconds=draw(st.sampled_from([None, 30.0])),
        max_stops_per_pass=draw(st.sampled_from([0, 1])),
        scale_up_timeout_seconds=draw(st.sampled_from([30.0, 600.0])),
        # 1 and 2: most waiting tasks sit beyond the exact places, in buckets.
        exact_queue_positions=draw(st.sampled_from([1, 2, 100])),
        # 0 and 1: admission's walk stops early, the rest wait NotConsidered.
        backfill_candidates=draw(st.sampled_from([0, 1, 500])),
    )


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    options=options_of(),
    with_queues=st.sampled_from([False, True, "drawn"]),
    teams=team_queues(),
    grows=st.sampled_from(SCALINGS),
    history=st.lists(
        st.tuples(steps(), st.sets(st.sampled_from(NAMES), max_size=2)), min_size=1, max_size=60
    ),
)
def test_incremental_plan_equals_full_plan_on_random_histories(
    options: PlanOptions,
    with_queues: bool | str,
    teams: tuple[QueueConfig, QueueUsage | None],
    grows: Scaling | None,
    history: list[tuple[tuple[Any, ...], set[str]]],
) -> None:
    if with_queues == "drawn":  # several queues, weights, limits, decayed usage
        world = History(options, teams[0], teams[1], scaling=grows)
    else:
        world = History(options, parse_queue_config(QUEUES) if with_queues else None, scaling=grows)
    for step, failing in history:
        world.apply(step)
        world.fail_once = frozenset(failing)  # status writes that fail in this pass only
        world.run_pass()
        if step[0] == "tick":
            world.run_pass()  # the same inputs once more, at the same instant


MANY = tuple(f"t{i:02d}" for i in range(24))
# The same, spread over the drawn team queues (some in no team: the default queue).
MANY_TEAMS = tuple(f"{TEAMS[i % 5]}/t{i:02d}" if i % 5 < 4 else f"t{i:02d}" for i in range(24))


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    policy=st.sampled_from(["strict", "backfill", "besteffort"]),
    exact=st.sampled_from([1, 2, 3]),
    bound=st.sampled_from([0, 0, 1, 2, 500]),
    inflight=st.sampled_from([1, 1, 2, 8]),
    retention=st.sampled_from([None, 30.0]),
    tell=st.booleans(),
    teams=st.one_of(st.none(), team_queues()),
    data=st.data(),
)
def test_the_fast_pass_equals_the_full_plan(
    policy: str,
    exact: int,
    bound: int,
    inflight: int,
    retention: float | None,
    tell: bool,
    teams: tuple[QueueConfig, QueueUsage | None] | None,
    data: st.DataObject,
) -> None:
    """One queue, no preemption, dependencies or autoscaler: the incremental planner takes its
    fast pass (the kept queue order, reconciler.core.incremental.keptorder), with many waiting
    tasks, few
    exact places and a short walk, so places, buckets and the walk's tail all move. Also
    with several team queues (weights, limits, decayed usage), each walk bounded alike."""
    names = MANY if teams is None else MANY_TEAMS
    start = data.draw(
        st.lists(st.tuples(st.sampled_from(names), plain_specs_of("x")), min_size=8, max_size=40)
    )
    history = data.draw(
        st.lists(
            st.tuples(
                steps(names, plain_specs_of).filter(lambda s: s[0] != "scaling"),
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
        backfill_candidates=bound,
        max_inflight=inflight,
        ray_history_retention_seconds=retention,
        lost_grace_seconds=5.0,
        start_timeout_seconds=10.0,
    )
    queues, past = teams if teams is not None else (None, None)
    world = History(options, queues, past, tell_changed=tell, every_field=True)
    for name, fields in start:
        world.apply(("put", name, fields))
    world.run_pass()
    for step, failing in history:
        world.apply(step)
        world.fail_once = frozenset(failing)
        world.run_pass()
        if step[0] == "tick":
            world.run_pass()


def test_unchanged_tasks_cost_no_reconcile(monkeypatch: pytest.MonkeyPatch) -> None:
    world = History(PlanOptions(queue_id="q"), None, capacity=Capacity(2, 0, 16 * GIB))
    for i in range(20):
        world.apply(("put", f"t{i:02d}", {"priority": i % 3, "timeoutSeconds": 50}))
    world.run_pass()
    for index in range(len(world.jobs)):
        world.apply(("ray", index, RUNNING, 0))
    world.run_pass()
    world.run_pass()  # statuses settle: positions, Running
    world.compare = False  # count the incremental planner's work alone
    calls: list[str] = []
    real = planner.reconcile_task

    def counting(env: planner.TaskEnv, spec: TaskInput, prev: Any, now: float) -> Any:
        calls.append(spec.name)
        return real(env, spec, prev, now)

    monkeypatch.setattr(planner, "reconcile_task", counting)
    world.apply(("tick", 10))
    world.apply(("rebuild",))  # Ray's listing parsed anew: equal jobs, new objects
    before = dict(world.statuses)
    result = world.run_pass()
    assert calls == []  # nothing changed, and no deadline passed
    assert all(result.statuses[n] is before[n] for n in before)
    world.apply(("put", "t05", {"priority": 2, "timeoutSeconds": 50}))
    world.run_pass()
    assert calls == ["t05"]  # only the edited task
    calls.clear()
    world.apply(("tick", 45))  # past the running jobs' timeoutSeconds (started 10 s earlier)
    result = world.run_pass()
    running = [n for n, s in before.items() if s.status.phase is Phase.RUNNING]
    assert running and sorted(calls) == sorted(running)
    assert {t.task for t in result.timeouts} == set(running)


def test_a_deadline_is_kept_to_the_last_float() -> None:
    """A run started at `s` with timeoutSeconds `t` times out at the first `now` where
    `now - s > t`: the cached result holds up to it and not a step further."""
    world = History(PlanOptions(queue_id="q"), None)
    world.apply(("put", "a", {"timeoutSeconds": 5}))
    world.run_pass()
    world.apply(("tick", 0.1))
    world.apply(("ray", 0, RUNNING, 0))
    world.run_pass()
    world.run_pass()
    recorded = world.statuses["a"].status.started_at
    assert recorded is not None
    started = recorded.timestamp()
    # The planner's clock is a datetime: microseconds. Find the first that is past the limit.
    tick = timedelta(microseconds=1)
    boundary = recorded + timedelta(seconds=5)
    while boundary.timestamp() - started > 5:
        boundary -= tick
    while boundary.timestamp() - started <= 5:
        boundary += tick
    world.now = (boundary - tick).timestamp()
    assert world.run_pass().timeouts == []
    world.now = boundary.timestamp()
    assert [t.task for t in world.run_pass().timeouts] == ["a"]


def test_a_start_at_the_head_looks_at_the_head_not_the_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kept order (reconciler.core.incremental.keptorder): when a job ends and the next task
    starts,
    the pass sets the statuses of the exact places and the bucket edges, reconciles only the
    tasks whose inputs changed, and hands every other status back as it was given."""
    options = PlanOptions(queue_id="q", policy="strict", exact_queue_positions=5)
    world = History(options, None, capacity=Capacity(2, 0, 16 * GIB))
    for i in range(400):
        world.apply(("put", f"t{i:03d}", {"priority": 1, "timeoutSeconds": 50}))
    for _ in range(3):
        world.run_pass()
    world.apply(("ray", 0, RUNNING, 0))
    world.apply(("ray", 1, RUNNING, 0))
    world.run_pass()
    world.run_pass()
    assert world.memo.order is not None  # the next pass may take the fast path
    queued: list[str] = []
    reconciled: list[str] = []
    real_queue, real_reconcile = lifecycle.queue, planner.reconcile_task

    def counting_queue(body: Any, *args: Any) -> Any:
        queued.append(body.phase)
        return real_queue(body, *args)

    def counting_reconcile(env: planner.TaskEnv, spec: TaskInput, prev: Any, now: float) -> Any:
        reconciled.append(spec.name)
        return real_reconcile(env, spec, prev, now)

    monkeypatch.setattr(lifecycle, "queue", counting_queue)
    monkeypatch.setattr(planner, "reconcile_task", counting_reconcile)
    world.apply(("ray", 0, SUCCEEDED, 0))
    before = dict(world.statuses)
    result = world.run_pass()  # compared with plan(): the same plan
    # plan() (run by the comparison) reconciles all 400; the fast pass only the ended one.
    assert reconciled.count("t000") == 2 and len(reconciled) == 400 + 1
    assert [s.task for s in result.submits] == ["t002"]
    # The fast pass placed the exact five and the task at the bucket edge; plan() all 397.
    assert len(queued) - 397 <= 8
    same = [n for n in before if result.statuses[n] is before[n]]
    assert len(same) >= 390
