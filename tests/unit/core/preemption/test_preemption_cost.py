"""Preemption cheap enough to leave on: victims by the work they would lose, the
per-task cap on by default (3, per queue), `spec.resumable`, and the run's environment
(RAYQUEUE_RUN, RAYQUEUE_PREEMPTED)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from reconciler.core.preemption.rules import ONE_QUEUE, setup
from reconciler.core.preemption.victims import (
    LOWER_PRIORITY,
    Preemptor,
    Rules,
    Running,
    choose_in_cohort,
    dominant_share,
    lost_work,
)
from reconciler.core.task.jobs import PREEMPTED_ENV, RUN_ENV
from specs.cluster import SUCCEEDED, Capacity
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from tests.support.planner_world import GIB, Cluster, task
from tests.unit.core.preemption.test_planner_preemption import ON, filled

NOW = 10_000.0
ROOT = Path(__file__).resolve().parents[4]


def cpu(n: float) -> Capacity:
    return Capacity(n, 0, 0)


ON_RULES = Rules(LOWER_PRIORITY)


def order(running: list[Running], rules: Rules = ON_RULES) -> list[str]:
    """The order victims are taken in: one CPU short, so the cheapest one alone is chosen."""
    running, taken = list(running), []
    while True:
        picked = choose_in_cohort(
            Preemptor("p9", 9, cpu(1)),
            "q",
            [("q", r) for r in running],
            {"q": rules},
            {},
            lambda freed, _own: cpu(1).fits_in(freed),
            NOW,
            reclaim=False,
        )
        if not picked:
            return taken
        taken.append(picked[0].run.name)
        running = [r for r in running if r.name != picked[0].run.name]


def run(name: str, priority: int, age: float, size: float = 0.25, **kw: object) -> Running:
    return Running(name, priority, cpu(1), NOW - age, size=size, **kw)  # type: ignore[arg-type]


# --- the victim order -------------------------------------------------------------------------


def test_victims_are_lowest_priority_then_least_lost_work_then_name() -> None:
    running = [
        run("p1-fresh", 1, 10),  # higher priority: last, however little it would lose
        run("big-young", 0, 200, size=0.5),  # 200 s x 0.5 = 100
        run("small-old", 0, 300, size=0.25),  # 300 s x 0.25 = 75
        run("b", 0, 100, size=0.5),  # 50, tied with a
        run("a", 0, 200, size=0.25),  # 50
    ]
    assert order(running) == ["a", "b", "small-old", "big-young", "p1-fresh"]


def test_a_resumable_run_loses_only_its_grace_and_is_taken_first() -> None:
    resumable = run("ckpt", 0, 5000, resumable=True, grace_seconds=30)
    plain = run("plain", 0, 100)
    assert lost_work(resumable, NOW) == 30 * 0.25
    assert lost_work(plain, NOW) == 100 * 0.25
    assert lost_work(run("young", 0, 10, resumable=True, grace_seconds=30), NOW) == 10 * 0.25
    assert order([plain, resumable]) == ["ckpt", "plain"]
    # ... but never before a lower priority: priority comes first
    assert order([run("p0", 0, 9000), replace(resumable, priority=1)]) == ["p0", "ckpt"]


@pytest.mark.parametrize(
    ("request_", "total", "share"),
    [
        (Capacity(2, 0, 0), Capacity(8, 0, 64 * GIB), 0.25),
        (Capacity(1, 1, 0), Capacity(8, 4, 64 * GIB), 0.25),  # its GPU share dominates
        (Capacity(1, 0, 32 * GIB), Capacity(8, 0, 64 * GIB), 0.5),  # memory dominates
        (Capacity(1, 1, 0), Capacity(8, 0, 0), 0.125),  # a resource the cluster lacks: left out
        (Capacity(1, 0, 0), Capacity(), 0.0),  # no capacity known
    ],
)
def test_size_is_the_dominant_share_of_the_cluster(
    request_: Capacity, total: Capacity, share: float
) -> None:
    assert dominant_share(request_, total) == share


def test_a_pass_prefers_the_victim_that_loses_least_work() -> None:
    # On the 4-CPU cluster: `wide` (2 CPU) has run 200 s, `narrow` (1 CPU) 300 s. One CPU is
    # missing: the shortest run would be `wide`; by lost work, `narrow` goes (75 < 100).
    w = Cluster({"narrow": task(0, 1), "filler": task(5, 1)}, options=ON)
    w.step()
    w.run_all()
    w.now += timedelta(seconds=100)
    w.specs["wide"] = task(0, 2)
    w.step()
    w.run_all()
    w.now += timedelta(seconds=200)
    w.specs["urgent"] = task(9, 1)
    p = w.step()
    assert [pr.victims for pr in p.preemptions] == [("narrow",)]


def test_a_pass_takes_the_resumable_run_first() -> None:
    w = filled(urgent=task(9, 1))
    w.specs["low2"] = task(0, 1, resumable=True)  # not run-defining: its run goes on
    p = w.step()
    assert [pr.victims for pr in p.preemptions] == [("low2",)]
    plain = filled(urgent=task(9, 1))
    assert [pr.victims for pr in plain.step().preemptions] == [("low0",)]  # the name decides


# --- the cap ----------------------------------------------------------------------------------


def test_the_cap_is_3_by_default_everywhere() -> None:
    assert Rules().max_per_task == 3
    assert PlanOptions().preemption_max_per_task == 3
    assert setup(None, PlanOptions()).queues[ONE_QUEUE].rules.max_per_task == 3


CONFIG = """apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 4}
      preemption: {withinQueue: LowerPriority, maxPerTask: 1}
    - name: team-b
      nominalQuota: {cpu: 4}
      preemption: {withinQueue: LowerPriority}
    - name: team-c
      preemption: {maxPerTask: 0}
"""


def test_the_cap_is_set_per_queue_and_a_queue_file_ignores_the_flag() -> None:
    config = parse_queue_config(CONFIG)
    rules = setup(config, PlanOptions(preemption_max_per_task=7)).rules()
    assert (rules["team-a"].max_per_task, rules["team-b"].max_per_task) == (1, 3)
    assert (rules["team-c"].max_per_task, rules["default"].max_per_task) == (0, 3)  # 0: no cap
    assert setup(None, PlanOptions(preemption_max_per_task=7)).rules()[ONE_QUEUE].max_per_task == 7


def test_max_per_task_must_be_a_whole_number_at_least_0() -> None:
    with pytest.raises(ValueError, match="maxPerTask"):
        parse_queue_config(CONFIG.replace("maxPerTask: 1", "maxPerTask: -1"))


def _preempted(w: Cluster, name: str, times: int) -> None:
    status = w.statuses[name]
    w.statuses[name] = status.model_copy(
        update={"status": status.status.model_copy(update={"preemptions": times})}
    )


def test_by_default_a_task_preempted_3_times_runs_to_the_end() -> None:
    w = filled(urgent=task(9, 1))
    for name in ("low0", "low1", "low2"):
        _preempted(w, name, 3)
    assert [p.victims for p in w.step().preemptions] == [("low3",)]
    w = filled(urgent=task(9, 1))
    for name in ("low0", "low1", "low2", "low3"):
        _preempted(w, name, 3)
    p = w.step()
    assert p.preemptions == [] and p.stops == []  # it waits: every run is exempt
    w = filled(urgent=task(9, 1))
    w.options = replace(ON, preemption_max_per_task=0)  # 0: no cap
    _preempted(w, "low0", 3)
    assert [p.victims for p in w.step().preemptions] == [("low0",)]


# --- the run's environment --------------------------------------------------------------------


def env_of(p: object, name: str) -> dict[str, str]:
    (submit,) = [s for s in p.submits if s.task == name]  # type: ignore[attr-defined]
    return dict(submit.request.runtime_env["env_vars"])


def test_every_run_gets_its_number_and_the_run_after_a_preemption_is_told() -> None:
    w = filled(urgent=task(9, 4))
    first_hash = w.status("low0").spec_hash
    w.step()  # all four preempted
    w.finish_stops()
    w.step()  # urgent starts
    w.run_all()
    w.ray("urgent", SUCCEEDED)
    p = w.step()  # the victims' second runs
    env = env_of(p, "low0")
    assert (env[RUN_ENV], env[PREEMPTED_ENV]) == ("2", "1")
    body = w.status("low0")
    # the environment is not part of the spec hash, nor of the submission id
    assert body.spec_hash == first_hash == w.specs["low0"].spec_hash()  # type: ignore[union-attr]
    assert str(body.submission_id).endswith("-2") and body.after_preemption


def test_a_first_run_is_not_told_it_was_preempted_even_if_its_spec_says_so() -> None:
    w = Cluster(
        {"a": task(0, 1, runtimeEnv={"env_vars": {PREEMPTED_ENV: "1", RUN_ENV: "9"}})},
        options=ON,
    )
    env = env_of(w.step(), "a")
    assert env[RUN_ENV] == "1" and PREEMPTED_ENV not in env


def test_a_run_submitted_again_after_a_crash_keeps_its_preempted_flag() -> None:
    w = filled(urgent=task(9, 4))
    w.step()
    w.finish_stops()
    w.step()
    w.run_all()
    w.ray("urgent", SUCCEEDED)
    p = w.step()
    lost = [s.request.submission_id for s in p.submits if s.task == "low0"]
    del w.jobs[lost[0]]  # the submit never reached Ray: the next pass submits it again
    again = w.step()
    env = env_of(again, "low0")
    assert (env[RUN_ENV], env[PREEMPTED_ENV]) == ("2", "1")


def test_resumable_is_not_run_defining() -> None:
    assert task(0, 1, resumable=True).spec_hash() == task(0, 1).spec_hash()


# --- the schema -------------------------------------------------------------------------------


def test_the_schema_has_resumable_as_a_boolean_defaulting_to_false() -> None:
    schema = json.loads((ROOT / "specs" / "task.schema.json").read_text())
    spec = schema["definitions"]["TaskSpec"]["properties"]["resumable"]
    assert (spec["type"], spec["default"]) == ("boolean", False)
    assert "RAYQUEUE_PREEMPTED" in spec["description"]
    with pytest.raises(ValueError, match="resumable"):
        task(0, 1, resumable="sometimes")
