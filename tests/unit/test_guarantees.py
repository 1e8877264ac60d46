"""The quota and preemption guarantees of issue 25, each as a small hand-made case against the
planner: a task that can never start blocks nobody; preemption never cascades nor takes more
than the heads it serves need; backfill estimates from what can free the queue's quota; work
above a queue's nominal quota is always reclaimable."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from reconciler.core.planner import Plan
from specs.cluster import META_TASK, STOPPED, Capacity
from specs.models import Phase, Reason, Task
from specs.parse import parse_queue_config
from specs.queues import QueueConfig
from specs.settings import PlanOptions
from tests.support.planner_world import GIB, T0, task
from tests.unit.test_planner_preemption import Cluster


def queues(*blocks: str) -> QueueConfig:
    """`blocks`: each queue's YAML lines after its name, e.g. 'nominalQuota: {cpu: 4}'."""
    text = "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n"
    for i, block in enumerate(blocks):
        text += f"    - name: team-{'abcd'[i]}\n"
        text += "".join(f"      {line}\n" for line in block.split("\n"))
    return parse_queue_config(text)


def started(p: Plan) -> list[str]:
    return sorted(s.task for s in p.submits)


def victims(p: Plan) -> list[str]:
    return sorted(v for d in p.preemptions for v in d.victims)


def world(
    runs: dict[str, Task],
    config: QueueConfig | None,
    cpus: float,
    age: float = 600,
    preemption: str = "Never",
) -> Cluster:
    """`runs` running for `age` seconds on a `cpus`-CPU cluster, backfill."""
    w = Cluster(
        dict(runs),
        capacity=Capacity(cpus, 0, 64 * GIB),
        options=PlanOptions(policy="backfill", preemption=preemption),
        queues=config,
    )
    w.step()
    w.run_all()
    assert all(w.phase(n) is Phase.RUNNING for n in runs)
    w.now += timedelta(seconds=age)
    return w


def stop_victims_of(w: Cluster, preemptor: str) -> None:
    """The grace period of `preemptor`'s victims is over: their jobs are gone from Ray."""
    mine = {n for n, s in w.statuses.items() if s.status.preempted_by == preemptor}
    for sid in sorted(w.stopping):
        job = w.jobs[sid]
        if job.metadata.get(META_TASK) in mine:
            w.jobs[sid] = replace(job, status=STOPPED, end_time=w.now.timestamp())
            w.stopping.discard(sid)


# --- 1. never-fits is exact ------------------------------------------------------------------


def test_a_task_larger_than_its_queue_can_ever_get_blocks_nobody() -> None:
    # team-a may borrow without limit, but team-b lends at most 1 CPU: team-a never gets 6.
    config = queues("nominalQuota: {cpu: 4}", "nominalQuota: {cpu: 4}\nlendingLimit: {cpu: 1}")
    w = world({}, config, 8)
    w.specs["team-a/big"] = task(5, 6)
    w.specs["team-a/small"] = task(0, 1)
    p = w.step()
    assert started(p) == ["team-a/small"]
    big = w.status("team-a/big")
    assert big.phase is Phase.QUEUED and big.reason == Reason.QUOTA_EXCEEDED
    assert "may hold at most 5" in big.message
    assert "until the queue configuration changes" in big.message


def test_a_task_that_fits_what_the_lenders_lend_is_not_flagged() -> None:
    config = queues("nominalQuota: {cpu: 4}", "nominalQuota: {cpu: 4}\nlendingLimit: {cpu: 1}")
    w = world({}, config, 8)
    w.specs["team-a/five"] = task(5, 5)
    assert started(w.step()) == ["team-a/five"]


# --- 2. no cascade -----------------------------------------------------------------------------


def test_a_preemptor_overtaken_hands_its_claim_on_no_cascade() -> None:
    runs = {f"r{i}": task(0, 1) for i in range(6)}
    w = world(runs, None, 6, preemption="LowerPriority")
    w.specs["x"] = task(8, 2)
    assert victims(w.step()) == ["r0", "r1"]
    w.specs["y"] = task(9, 2)  # overtakes x: the room r0 and r1 free is now y's
    p = w.step()
    assert victims(p) == [] and started(p) == []
    stop_victims_of(w, "x")
    p = w.step()
    assert started(p) == ["y"]
    assert victims(p) == ["r2", "r3"]  # x asks again, for its own two CPUs only
    w.run_all()
    stop_victims_of(w, "x")
    assert started(w.step()) == ["x"]
    preempted = sorted(n for n, s in w.statuses.items() if s.status.preemptions)
    assert preempted == ["r0", "r1", "r2", "r3"]  # four runs for four CPUs of demand


# --- 3. no over-preemption in one pass --------------------------------------------------------


def test_one_pass_preempts_only_what_its_heads_need() -> None:
    config = queues(
        "nominalQuota: {cpu: 4}\npreemption: {reclaimWithinCohort: Any}",
        "nominalQuota: {cpu: 4}\npreemption: {withinQueue: LowerPriority}",
    )
    w = world({f"team-b/b{i}": task(0, 1) for i in range(8)}, config, 8)
    w.specs["team-a/x"] = task(0, 2)
    w.specs["team-b/urgent"] = task(9, 2)
    p = w.step()
    by = {d.preemptor: sorted(d.victims) for d in p.preemptions}
    assert by == {
        "team-a/x": ["team-b/b0", "team-b/b1"],
        "team-b/urgent": ["team-b/b2", "team-b/b3"],
    }
    w.finish_stops()
    p = w.step()
    assert started(p) == ["team-a/x", "team-b/urgent"] and p.preemptions == []
    w.run_all()
    p = w.step()
    assert started(p) == [] and p.preemptions == []  # nobody preempted is resubmitted at once


# --- 4. backfill's estimate is the queue's ------------------------------------------------------


def test_backfill_estimates_from_what_frees_the_queues_quota() -> None:
    config = queues("nominalQuota: {cpu: 4}\nborrowingLimit: {cpu: 0}", "nominalQuota: {cpu: 4}")
    runs = {f"team-a/a{i}": task(0, 1) for i in range(3)}
    runs |= {f"team-b/b{i}": task(0, 1, timeoutSeconds=100) for i in range(4)}
    w = world(runs, config, 8, age=10)
    w.specs["team-a/head"] = task(5, 2)
    w.specs["team-a/small"] = task(0, 1)
    p = w.step()
    assert started(p) == []
    # Only team-a's own runs free its quota, and they have no timeout: no promise.
    assert w.status("team-a/head").estimated_start_at is None
    assert w.status("team-a/small").reason == Reason.WAITING_BEHIND_HIGHER_PRIORITY


def test_backfill_estimate_waits_for_both_the_quota_and_the_cluster() -> None:
    config = queues("nominalQuota: {cpu: 4}\nborrowingLimit: {cpu: 0}", "nominalQuota: {cpu: 4}")
    runs = {f"team-a/a{i}": task(0, 1, timeoutSeconds=100) for i in range(3)}
    runs |= {f"team-b/b{i}": task(0, 1, timeoutSeconds=50) for i in range(4)}
    w = world(runs, config, 8, age=10)
    w.specs["team-a/head"] = task(5, 2)
    w.specs["team-a/small"] = task(0, 1)
    p = w.step()
    # The cluster has room at 50 s (team-b's runs end), team-a's quota only at 100 s.
    eta = w.status("team-a/head").estimated_start_at
    assert eta is not None and eta.timestamp() - T0.timestamp() == 1 + 100
    # Then team-a holds small and head, 3 of its 4: small may start now.
    assert started(p) == ["team-a/small"]


# --- 5. the nominal guarantee ------------------------------------------------------------------


def test_non_preemptible_runs_do_not_borrow() -> None:
    config = queues(
        "nominalQuota: {cpu: 4}\npreemption: {reclaimWithinCohort: Any}", "nominalQuota: {cpu: 4}"
    )
    w = world({}, config, 8)
    for i in range(8):
        w.specs[f"team-b/b{i}"] = task(0, 1, preemptible=False)
    p = w.step()
    assert started(p) == [f"team-b/b{i}" for i in range(4)]
    waiting = w.status("team-b/b4")
    assert waiting.reason == Reason.QUOTA_EXCEEDED and "preemptible: false" in waiting.message
    w.run_all()
    w.specs["team-a/x"] = task(9, 4)
    assert started(w.step()) == ["team-a/x"]


def test_too_young_runs_above_nominal_are_reclaimable() -> None:
    config = queues(
        "nominalQuota: {cpu: 4}\npreemption: {reclaimWithinCohort: Any}",
        "nominalQuota: {cpu: 4}\npreemption: {minRuntimeSeconds: 3600}",
    )
    w = world({f"team-b/b{i}": task(0, 1) for i in range(8)}, config, 8, age=60)
    w.specs["team-a/x"] = task(9, 4)
    assert victims(w.step()) == [f"team-b/b{i}" for i in range(4)]


def test_a_queue_below_nominal_combines_reclaim_with_its_own_victims() -> None:
    config = queues(
        "nominalQuota: {cpu: 4}\n"
        "preemption: {reclaimWithinCohort: Any, withinQueue: LowerPriority}",
        "nominalQuota: {cpu: 4}",
    )
    runs = {f"team-a/a{i}": task(0, 1) for i in range(2)}
    runs |= {f"team-b/b{i}": task(0, 1) for i in range(6)}
    w = world(runs, config, 8)
    w.specs["team-a/x"] = task(9, 4)  # team-a at 2/4: 2 back from team-b, 2 of its own
    p = w.step()
    assert victims(p) == ["team-a/a0", "team-a/a1", "team-b/b0", "team-b/b1"]
    w.finish_stops()
    assert started(w.step()) == ["team-a/x"]
