"""The quota and preemption guarantees, each as a small hand-made case against the
planner: a task that can never start blocks nobody; preemption never cascades nor takes more
than the heads it serves need; backfill estimates from what can free the queue's quota; work
above a queue's nominal quota is always reclaimable."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from datetime import timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from reconciler.core.planner import Plan
from reconciler.core.task.jobs import claim_of
from specs.cluster import META_TASK, PENDING, RUNNING, STOPPED, SUCCEEDED
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.task.models import Phase, Reason
from tests.support.planner_world import T0, Cluster, running_cluster, task


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
    w = running_cluster({}, config, 8)
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
    w = running_cluster({}, config, 8)
    w.specs["team-a/five"] = task(5, 5)
    assert started(w.step()) == ["team-a/five"]


def test_a_non_preemptible_task_above_its_nominal_quota_blocks_nobody() -> None:
    # Pure sharing: team-a has no nominal quota, and a preemptible: false task never borrows,
    # so it can never start while the configuration stands, even on an empty cluster (before:
    # it was judged against what team-a may borrow, stayed the head and held team-a).
    config = queues("weight: 1", "weight: 1")
    w = running_cluster({}, config, 8)
    w.specs["team-a/pinned"] = task(5, 2, preemptible=False)
    w.specs["team-a/small"] = task(0, 1)
    w.specs["team-a/other"] = task(0, 1)
    p = w.step()
    assert started(p) == ["team-a/other", "team-a/small"]
    pinned = w.status("team-a/pinned")
    assert pinned.phase is Phase.QUEUED and pinned.reason == Reason.QUOTA_EXCEEDED
    assert "preemptible: false" in pinned.message
    assert "nominal 0" in pinned.message
    assert "until the queue configuration or the task changes" in pinned.message
    assert "can borrow" not in pinned.message
    w.run_all()
    assert started(w.step()) == []  # still flagged on the next pass, and nothing else waits


def test_a_non_preemptible_task_above_a_nominal_quota_blocks_nobody() -> None:
    config = queues("nominalQuota: {cpu: 2}", "nominalQuota: {cpu: 4}")
    w = running_cluster({}, config, 8)
    w.specs["team-a/pinned"] = task(5, 3, preemptible=False)
    w.specs["team-a/small"] = task(0, 1)
    p = w.step()
    assert started(p) == ["team-a/small"]
    pinned = w.status("team-a/pinned")
    assert pinned.reason == Reason.QUOTA_EXCEEDED
    assert "may hold at most 2" in pinned.message and "nominal 2" in pinned.message


def test_a_non_preemptible_task_within_its_nominal_quota_is_not_flagged() -> None:
    # It fits team-a's nominal quota, which team-a's own small run holds part of: it waits for
    # its quota (the queue's head), not flagged as never fitting, and starts once small ends.
    config = queues("nominalQuota: {cpu: 2}", "nominalQuota: {cpu: 4}")
    w = running_cluster({"team-a/small": task(0, 1)}, config, 8)
    w.specs["team-a/pinned"] = task(5, 2, preemptible=False)
    w.specs["team-a/after"] = task(0, 1)
    p = w.step()
    assert started(p) == []
    pinned = w.status("team-a/pinned")
    assert pinned.reason == Reason.QUOTA_EXCEEDED
    assert "until the queue configuration" not in pinned.message
    w.ray("team-a/small", SUCCEEDED)
    assert started(w.step()) == ["team-a/after", "team-a/pinned"]


# --- 2. no cascade -----------------------------------------------------------------------------


def test_a_preemptor_overtaken_hands_its_claim_on_no_cascade() -> None:
    runs = {f"r{i}": task(0, 1) for i in range(6)}
    w = running_cluster(runs, None, 6, preemption="LowerPriority")
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
    w = running_cluster({f"team-b/b{i}": task(0, 1) for i in range(8)}, config, 8)
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


def test_a_non_preemptible_preemptor_stops_what_its_nominal_quota_needs_at_once() -> None:
    # team-b borrows 2 of team-a's idle CPUs with six low runs. A non-preemptible head never
    # borrows, so its victims must bring team-b back to its nominal quota: five runs, not the
    # three the cluster alone needs (it then sat QuotaExceeded and preempted again, 6 CPUs
    # thrown away for a 3-CPU head; the property's saved example below).
    config = queues(
        "nominalQuota: {cpu: 4}",
        "nominalQuota: {cpu: 4}\npreemption: {withinQueue: LowerPriority}",
    )
    w = running_cluster({f"team-b/b{i}": task(i // 3, 1) for i in range(6)}, config, 6)
    w.specs["team-b/x"] = task(5, 3, preemptible=False)
    p = w.step()
    assert victims(p) == ["team-b/b0", "team-b/b1", "team-b/b2", "team-b/b3", "team-b/b4"]
    w.finish_stops()
    p = w.step()
    # Two of its victims start again at once, borrowing the cluster room x did not need:
    # admission counts all of team-b's usage against a non-preemptible start, so their stop
    # bought x its quota, not room (the cost of that rule, documented in scheduling.md).
    assert started(p) == ["team-b/b3", "team-b/b4", "team-b/x"] and p.preemptions == []
    w.run_all()
    assert w.step().preemptions == []
    assert sum(s.status.preemptions for s in w.statuses.values()) == 5


def test_a_non_preemptible_head_its_quota_cannot_make_room_for_preempts_nobody() -> None:
    # team-b's quota is held by runs of the head's own priority: no victim brings it back to
    # nominal, so stopping the two low runs for cluster room would throw them away for a head
    # that still may not start.
    config = queues(
        "nominalQuota: {cpu: 4}",
        "nominalQuota: {cpu: 4}\npreemption: {withinQueue: LowerPriority}",
    )
    runs = {f"team-b/b{i}": task(5 if i < 4 else 0, 1) for i in range(6)}
    w = running_cluster(runs, config, 6)
    w.specs["team-b/x"] = task(5, 2, preemptible=False)
    p = w.step()
    assert p.preemptions == [] and p.stops == []
    assert w.status("team-b/x").reason == Reason.WAITING_FOR_RESOURCES  # not Preempting


def test_a_preemptible_preemptor_may_count_on_what_its_queue_may_borrow() -> None:
    # The same, with a head that may borrow: the cluster is what it lacks, three runs do.
    config = queues(
        "nominalQuota: {cpu: 4}",
        "nominalQuota: {cpu: 4}\npreemption: {withinQueue: LowerPriority}",
    )
    w = running_cluster({f"team-b/b{i}": task(i // 3, 1) for i in range(6)}, config, 6)
    w.specs["team-b/x"] = task(5, 3)
    assert victims(w.step()) == ["team-b/b0", "team-b/b1", "team-b/b2"]
    w.finish_stops()
    assert started(w.step()) == ["team-b/x"]


# --- 4. backfill's estimate is the queue's ------------------------------------------------------


def test_backfill_estimates_from_what_frees_the_queues_quota() -> None:
    config = queues("nominalQuota: {cpu: 4}\nborrowingLimit: {cpu: 0}", "nominalQuota: {cpu: 4}")
    runs = {f"team-a/a{i}": task(0, 1) for i in range(3)}
    runs |= {f"team-b/b{i}": task(0, 1, timeoutSeconds=100) for i in range(4)}
    w = running_cluster(runs, config, 8, age=10)
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
    w = running_cluster(runs, config, 8, age=10)
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
    w = running_cluster({}, config, 8)
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
    w = running_cluster({f"team-b/b{i}": task(0, 1) for i in range(8)}, config, 8, age=60)
    w.specs["team-a/x"] = task(9, 4)
    assert victims(w.step()) == [f"team-b/b{i}" for i in range(4)]


def test_a_run_preempted_as_often_as_the_cap_allows_is_not_reclaimed() -> None:
    config = queues(
        "nominalQuota: {cpu: 4}\npreemption: {reclaimWithinCohort: Any}",
        "nominalQuota: {cpu: 4}\npreemption: {maxPerTask: 1}",  # the victims' queue's cap
    )
    w = running_cluster({f"team-b/b{i}": task(0, 1) for i in range(8)}, config, 8)
    for name in ("team-b/b0", "team-b/b1"):
        status = w.statuses[name]
        body = status.status.model_copy(update={"preemptions": 1})
        w.statuses[name] = status.model_copy(update={"status": body})
    w.specs["team-a/x"] = task(9, 2)
    assert victims(w.step()) == ["team-b/b2", "team-b/b3"]


def test_a_queue_below_nominal_combines_reclaim_with_its_own_victims() -> None:
    config = queues(
        "nominalQuota: {cpu: 4}\n"
        "preemption: {reclaimWithinCohort: Any, withinQueue: LowerPriority}",
        "nominalQuota: {cpu: 4}",
    )
    runs = {f"team-a/a{i}": task(0, 1) for i in range(2)}
    runs |= {f"team-b/b{i}": task(0, 1) for i in range(6)}
    w = running_cluster(runs, config, 8)
    w.specs["team-a/x"] = task(9, 4)  # team-a at 2/4: 2 back from team-b, 2 of its own
    p = w.step()
    assert victims(p) == ["team-a/a0", "team-a/a1", "team-b/b0", "team-b/b1"]
    w.finish_stops()
    assert started(w.step()) == ["team-a/x"]


# --- the property: several queues, arbitrary arrivals, finishes and stops ----------------------

PROPERTY_QUEUES = (
    "nominalQuota: {cpu: 4}\npreemption: {reclaimWithinCohort: Any, withinQueue: LowerPriority}",
    "nominalQuota: {cpu: 4}\nlendingLimit: {cpu: 2}\n"
    "preemption: {reclaimWithinCohort: LowerPriority, withinQueue: LowerPriority}",
    "nominalQuota: {cpu: 2}\nborrowingLimit: {cpu: 3}\npreemption: {reclaimWithinCohort: Any}",
)
NOMINALS = {"team-a": 4.0, "team-b": 4.0, "team-c": 2.0, "default": 0.0}
LENDING = {"team-a": 4.0, "team-b": 2.0, "team-c": 2.0, "default": 0.0}
BORROWING = {"team-a": math.inf, "team-b": math.inf, "team-c": 3.0, "default": math.inf}

_arrive = st.tuples(
    st.just("arrive"),
    st.sampled_from(["team-a/", "team-b/", "team-c/"]),
    st.integers(0, 9),  # priority
    st.integers(1, 3),  # cpus
    st.integers(1, 5),  # how many
    st.booleans(),  # preemptible
)
_action = st.one_of(
    _arrive,
    _arrive,
    _arrive,
    st.tuples(st.just("pass"), st.integers(0, 120)),
    st.tuples(st.just("finish"), st.integers(0, 30)),
    st.tuples(st.just("stop-one"), st.integers(0, 30)),  # one victim's grace ends
    st.tuples(st.just("stop-all")),
)


EXAMPLES = int(os.environ.get("RAYQUEUE_PROPERTY_EXAMPLES", "150"))


def _queue(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else "default"


# RAYQUEUE_PROPERTY_EXAMPLES=N runs that many (with --hypothesis-seed for a reproducible draw).
@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(_action, min_size=8, max_size=40))
# A non-preemptible head stopped what the cluster lacked (3 CPUs), not what its nominal quota
# needed (5), then preempted again: 6 CPUs for a 3-CPU head (saved by a local run; CI is
# derandomized). The planner's fault: see the test of the non-preemptible preemptor above.
@example(
    [
        ("pass", 0),
        ("finish", 0),
        ("finish", 1),
        ("arrive", "team-c/", 0, 1, 2, True),
        ("arrive", "team-b/", 2, 3, 1, False),
        ("stop-all",),
        ("pass", 0),
        ("arrive", "team-a/", 0, 1, 3, False),
    ]
)
def test_guarantees_hold_over_arbitrary_passes(actions: list[tuple[object, ...]]) -> None:
    # team-b borrows all of team-a's idle quota with low-priority work to begin with.
    start = {f"team-b/old{i}": task(i % 2, 1) for i in range(8)}
    w = running_cluster(start | {"team-c/old": task(0, 2)}, queues(*PROPERTY_QUEUES), 10)
    served: set[tuple[str, int]] = set()  # (task, run): preemptors, and starts while room stops
    preempted_cpus = 0.0
    slack = 0.0  # what a decision may free beyond its need: victim sizes, an over-full queue
    for index, action in enumerate(actions):
        kind = action[0]
        if kind == "arrive":
            _, where, priority, cpus, count, preemptible = action
            for k in range(int(str(count))):
                name = f"{where}t{index:02d}-{k}"
                w.specs[name] = task(int(str(priority)), float(str(cpus)), preemptible=preemptible)
        elif kind == "finish":
            running = sorted(n for n in w.statuses if w.phase(n) is Phase.RUNNING)
            if running:
                w.ray(running[int(str(action[1])) % len(running)], SUCCEEDED)
            continue
        elif kind == "stop-one":
            if w.stopping:
                sid = sorted(w.stopping)[int(str(action[1])) % len(w.stopping)]
                w.jobs[sid] = replace(w.jobs[sid], status=STOPPED, end_time=w.now.timestamp())
                w.stopping.discard(sid)
            continue
        elif kind == "stop-all":
            w.finish_stops()
            continue
        else:
            w.now += timedelta(seconds=int(str(action[1])))
        cpus_of = {n: t.spec.resources.cpu for n, t in w.specs.items() if t is not None}
        before_stopping = bool(w.stopping)
        # Room freed for a preemptor that a task of higher priority then takes is served too.
        promised = before_stopping or any(
            other.status.phase is Phase.QUEUED and other.status.reason == Reason.PREEMPTING
            for other in w.statuses.values()
        )
        # What each queue holds and has promised, as the preemptors will see it.
        held = dict.fromkeys(NOMINALS, 0.0)
        for name, status in w.statuses.items():
            if status.status.phase.active:
                held[_queue(name)] += cpus_of[name]
        p = w.step()
        _check_limits(w, cpus_of, p)
        for decision in p.preemptions:
            me, need = decision.preemptor, cpus_of[decision.preemptor]
            served.add((me, w.status(me).run))
            freed = sum(cpus_of[v] for v in decision.victims)
            preempted_cpus += freed
            largest = max(cpus_of[v] for v in decision.victims)
            # Its own queue's runs may go for its quota: as much as its queue holds above nominal.
            own = any(_queue(v) == _queue(me) for v in decision.victims)
            over = max(0.0, held[_queue(me)] - NOMINALS[_queue(me)]) if own else 0.0
            slack += largest - 1 + over + max(0.0, -decision.free.cpu)
            # Minimal: without its smallest victim, it would not fit in the cluster, or (for
            # its own queue's victims) in its quota.
            smallest = min(cpus_of[v] for v in decision.victims)
            assert need > decision.free.cpu + freed - smallest - 1e-9 or any(
                _queue(v) == _queue(me) for v in decision.victims
            ), f"{me} took more than it needed: {decision}"
        for s in p.submits:
            if promised or s.task in {d.preemptor for d in p.preemptions}:
                served.add((s.task, w.status(s.task).run))
        # No cascade: what was thrown away is what the preemptors (and the heads that took
        # their claims over) needed, up to victim sizes and over-full queues.
        need_total = sum(cpus_of.get(n, 0.0) for n, _ in served)
        assert preempted_cpus <= need_total + slack + 1e-9, (preempted_cpus, need_total, slack)
        if not before_stopping:
            _check_reclaim_offered(w, cpus_of, p)
        for sid, job in w.jobs.items():  # Ray runs what was submitted (seen next pass)
            if job.status == PENDING:
                w.jobs[sid] = replace(job, status=RUNNING)


def _live_cpus(w: Cluster) -> float:
    """What Ray's live jobs hold, stopping victims included."""
    return sum(claim_of(job).cpu for job in w.jobs.values() if not job.terminal)


def _check_limits(w: Cluster, cpus_of: dict[str, float], p: Plan) -> None:
    """No plan exceeds the cluster, a quota, a borrowingLimit or a lendingLimit, and no run that
    may not be stopped borrows."""
    live = sum(
        float(j.metadata.get("rayqueue.cpu", 0) or 0) for j in w.jobs.values() if not j.terminal
    )
    assert live <= 10 + 1e-9, "the cluster"
    usage = dict.fromkeys(NOMINALS, 0.0)
    fixed = dict.fromkeys(NOMINALS, 0.0)
    for name, status in w.statuses.items():
        if status.status.phase.active:
            usage[_queue(name)] += cpus_of[name]
            spec = w.specs.get(name)
            if spec is not None and not spec.spec.preemptible:
                fixed[_queue(name)] += cpus_of[name]
    for q in NOMINALS:
        assert usage[q] <= NOMINALS[q] + BORROWING[q] + 1e-9, f"{q}'s borrowingLimit"
    started = {_queue(s.task) for s in p.submits}
    for q in started:
        assert fixed[q] <= NOMINALS[q] + 1e-9, f"a non-preemptible run borrows in {q}"
    if any(usage[q] > NOMINALS[q] + 1e-9 for q in started):
        borrowed = sum(max(0.0, usage[q] - NOMINALS[q]) for q in NOMINALS)
        lent = sum(min(LENDING[q], max(0.0, NOMINALS[q] - usage[q])) for q in NOMINALS)
        assert borrowed <= lent + 1e-9, "more borrowed than the lendingLimits lend"


def _check_reclaim_offered(w: Cluster, cpus_of: dict[str, float], p: Plan) -> None:
    """No queue below nominal waits while a borrower holds reclaimable work it needs: after a
    pass with nothing stopping before it, team-a's head (reclaim Any), if it fits within
    team-a's nominal quota and in what is free plus what the borrowers hold above their
    nominal in runs that may be stopped, preempts (unless someone else did in this pass)."""
    if any(d.preemptor != "" and not d.preemptor.startswith("team-a/") for d in p.preemptions):
        return
    queued = [
        (-t.spec.priority, (w.status(n).queued_at or T0).timestamp(), n)
        for n, t in w.specs.items()
        if t is not None and _queue(n) == "team-a" and w.phase(n) is Phase.QUEUED
    ]
    if not queued:
        return
    head = min(queued)[2]
    if w.status(head).reason == Reason.INFLIGHT_LIMIT:
        return
    need = cpus_of[head]
    usage = dict.fromkeys(NOMINALS, 0.0)
    movable = dict.fromkeys(NOMINALS, 0.0)
    for name, status in w.statuses.items():
        if not status.status.phase.active:
            continue
        usage[_queue(name)] += cpus_of[name]
        spec = w.specs.get(name)
        # A cap on preemptions per task may exempt a run: count only runs preempted rarely.
        if spec is not None and spec.spec.preemptible and status.status.preemptions < 3:
            movable[_queue(name)] += cpus_of[name]
    if usage["team-a"] + need > NOMINALS["team-a"] + 1e-9:
        return
    room = 10 - _live_cpus(w)
    for q in ("team-b", "team-c", "default"):
        room += min(movable[q], max(0.0, usage[q] - NOMINALS[q]))
    if room + 1e-9 >= need:
        assert head in {d.preemptor for d in p.preemptions}, (
            f"{head} waits while borrowers hold its quota: {w.status(head)}"
        )
