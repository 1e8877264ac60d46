"""README promises that no other test covers: each test here
fails if its sentence stops holding.

- "With no `timeoutSeconds` anywhere this [backfill] is exactly the old service's strict order."
- "`spec.preemptible: false`: never stopped to make room for more urgent work."
- "`preemptions`: how often a run of the task was preempted (never counted as a failure)."
- "`priority`, `timeoutSeconds` and labels apply in place."
- "free is that minus the declared requests of this queue's [live] jobs."
- "A new run the user asks for (a spec change, `rerun`, resume) starts again with `retries: 0`."
- docs/scheduling.md, Guarantees: "what stops for nobody goes to the first head that asks".
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import event, given, settings
from hypothesis import strategies as st

from reconciler.core.planner import Plan
from specs.cluster import FAILED, PENDING, RUNNING, SUCCEEDED, Capacity
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions
from specs.task.models import Phase, Reason
from specs.task.records import Task
from tests.support.planner_world import GIB, Cluster, PlanWorld, task
from tests.unit.core.test_planner_guarantees import PROPERTY_QUEUES, queues

# --- backfill without any timeoutSeconds is strict ------------------------------------------

_no_timeout_action = st.one_of(
    st.tuples(st.just("arrive"), st.integers(0, 3), st.integers(1, 6)),  # priority, cpus
    st.tuples(st.just("arrive"), st.integers(0, 3), st.integers(1, 6)),
    st.tuples(st.just("finish"), st.integers(0, 20)),
    st.tuples(st.just("pass"), st.integers(0, 600)),
)


def _starts(p: Plan) -> list[str]:
    return [s.task for s in p.submits]


@settings(max_examples=100, deadline=None)
@given(st.lists(_no_timeout_action, min_size=4, max_size=40))
def test_backfill_without_any_timeout_starts_exactly_what_strict_starts(
    actions: list[tuple[object, ...]],
) -> None:
    # Two worlds fed the same arrivals and finishes, one under each policy: with no bound on
    # any run, backfill can promise the head nothing, so it may let nobody past it.
    worlds = {
        policy: PlanWorld({}, capacity=Capacity(6, 0, 64 * GIB), options=PlanOptions(policy=policy))
        for policy in ("strict", "backfill")
    }
    for index, action in enumerate(actions):
        if action[0] == "arrive":
            _, priority, cpus = action
            for w in worlds.values():
                w.specs[f"t{index:02d}"] = task(int(str(priority)), float(str(cpus)))
        elif action[0] == "finish":
            for w in worlds.values():
                running = sorted(n for n in w.statuses if w.phase(n) is Phase.RUNNING)
                if running:
                    w.ray(running[int(str(action[1])) % len(running)], SUCCEEDED)
        else:
            seconds = float(str(action[1]))
            plans = {policy: w.step(seconds) for policy, w in worlds.items()}
            assert _starts(plans["backfill"]) == _starts(plans["strict"])
            for w in worlds.values():  # Ray runs what was submitted
                for sid, job in w.jobs.items():
                    if job.status == PENDING:
                        w.jobs[sid] = replace(job, status=RUNNING)
    phases = {policy: {n: w.phase(n) for n in w.statuses} for policy, w in worlds.items()}
    assert phases["backfill"] == phases["strict"]


# --- preemptible: false is never a victim ----------------------------------------------------


def _config(kind: str) -> QueueConfig | None:
    # Fair-share preemption runs in pure sharing, where a non-preemptible task never runs
    # (it never borrows, and a team there has no nominal quota): nothing to show there.
    return None if kind == "one queue" else queues(*PROPERTY_QUEUES)


_arrive = st.tuples(
    st.just("arrive"),
    st.sampled_from(["team-a/", "team-b/", "team-c/"]),
    st.integers(0, 9),  # priority
    st.integers(1, 3),  # cpus
    st.integers(1, 4),  # how many
    st.booleans(),  # preemptible
)
_action = st.one_of(
    _arrive,
    _arrive,
    st.tuples(st.just("pass"), st.integers(0, 900)),
    st.tuples(st.just("finish"), st.integers(0, 30)),
    st.tuples(st.just("stop-all")),
)


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(["one queue", "reclaim and within"]),
    st.lists(_action, min_size=6, max_size=40),
)
def test_a_non_preemptible_run_is_never_stopped_to_make_room(
    kind: str, actions: list[tuple[object, ...]]
) -> None:
    # Specs never change nor go, and carry no timeout: every stop here is a preemption. To
    # begin with, team-b's low runs fill the cluster, two of them non-preemptible (within
    # team-b's nominal quota: such a run never borrows).
    start: dict[str, Task | None] = {
        f"team-b/old{i}": task(0, 1, preemptible=i >= 2) for i in range(10)
    }
    w = Cluster(
        start,
        capacity=Capacity(10, 0, 64 * GIB),
        options=PlanOptions(policy="backfill", preemption="LowerPriority")
        if kind == "one queue"
        else PlanOptions(policy="backfill"),
        queues=_config(kind),
    )
    w.step()
    w.run_all()
    w.now += timedelta(seconds=600)
    for index, action in enumerate(actions):
        if action[0] == "arrive":
            _, where, priority, cpus, count, preemptible = action
            for k in range(int(str(count))):
                w.specs[f"{where}t{index:02d}-{k}"] = task(
                    int(str(priority)), float(str(cpus)), preemptible=preemptible
                )
            continue
        if action[0] == "finish":
            running = sorted(n for n in w.statuses if w.phase(n) is Phase.RUNNING)
            if running:
                w.ray(running[int(str(action[1])) % len(running)], SUCCEEDED)
            continue
        if action[0] == "stop-all":
            w.finish_stops()
            continue
        p = w.step(float(str(action[1])))
        if p.preemptions:
            pinned = [n for n, t in w.specs.items() if t is not None and not t.spec.preemptible]
            if any(w.statuses[n].status.phase.active for n in pinned if n in w.statuses):
                event(f"{kind}: preempted beside a non-preemptible run")
        for decision in p.preemptions:
            for victim in decision.victims:
                spec = w.specs[victim]
                assert spec is not None and spec.spec.preemptible, f"{victim} was a victim"
        for stop in p.stops:
            spec = w.specs.get(stop.task or "")
            assert spec is not None and spec.spec.preemptible, f"{stop.task} was stopped"
        w.run_all()


# --- a preemption is never counted as a failure ----------------------------------------------


def test_a_preemption_never_uses_up_the_retry_limit() -> None:
    # Four 1-CPU runs with one retry each fill the cluster; an urgent task preempts them all.
    retry = {"limit": 1, "on": ["Failed"], "backoffSeconds": 1}
    w = Cluster(
        {f"low{i}": task(0, 1, retry=retry) for i in range(4)},
        options=PlanOptions(policy="backfill", preemption="LowerPriority"),
    )
    w.step()
    w.run_all()
    w.now += timedelta(seconds=600)
    w.specs["urgent"] = task(9, 4)
    p = w.step()
    assert sorted(v for d in p.preemptions for v in d.victims) == [f"low{i}" for i in range(4)]
    body = w.status("low0")
    assert body.phase is Phase.QUEUED and body.reason == Reason.PREEMPTED
    assert body.preemptions == 1 and body.retries == 0
    w.finish_stops()
    w.step()  # urgent starts
    w.run_all()
    w.ray("urgent", SUCCEEDED)
    w.step()  # the victims start again, as run 2
    w.run_all()
    assert w.status("low0").run == 2 and w.status("low0").retries == 0
    # The run after the preemption fails: the one retry the task has is still there.
    w.ray("low0", FAILED)
    w.step()
    body = w.status("low0")
    assert body.phase is Phase.QUEUED and body.reason == Reason.RETRY_BACKOFF
    assert body.retries == 1 and body.preemptions == 1


# --- priority, timeoutSeconds and labels apply in place --------------------------------------


def _labelled(priority: int, labels: dict[str, str], **spec: object) -> Task:
    base = task(priority, 1, **spec)
    return Task.model_validate(base.to_document() | {"metadata": {"labels": labels}})


def test_priority_timeout_and_labels_apply_in_place() -> None:
    w = PlanWorld({"a": _labelled(1, {"team": "x"})})
    w.step()
    w.ray("a", RUNNING)
    w.step()
    sid = w.status("a").submission_id
    w.specs["a"] = _labelled(9, {"team": "y", "stage": "eval"}, timeoutSeconds=3600)
    p = w.step()
    assert p.stops == [] and p.submits == []
    assert w.status("a").submission_id == sid and w.phase("a") is Phase.RUNNING
    assert w.status("a").run == 1


# --- free capacity: a job of ours still stopping holds its room ------------------------------


def test_a_job_still_stopping_holds_its_room_until_ray_reports_it_ended() -> None:
    # "free is that minus the declared requests of this queue's live jobs": a deleted task's
    # and a timed-out run's jobs hold their CPUs until Ray reports them ended, not until the
    # planner asks to stop them.
    w = Cluster({"gone": task(0, 2), "slow": task(0, 2, timeoutSeconds=60)})
    w.step()
    w.run_all()
    del w.specs["gone"]
    w.now += timedelta(seconds=120)
    w.specs["next"] = task(9, 2)
    p = w.step()
    assert sorted(s.task or "" for s in p.stops) == ["gone", "slow"]
    assert w.phase("slow") is Phase.TIMED_OUT
    for _ in range(3):  # Ray still lists both jobs as running
        assert w.step().submits == []
        assert w.status("next").reason == Reason.WAITING_FOR_RESOURCES
    w.finish_stops()
    assert _starts(w.step()) == ["next"]


# --- a rerun starts again with retries: 0 -----------------------------------------------------


def test_a_rerun_after_the_retry_limit_starts_again_with_no_retries_used() -> None:
    # test_planner_pipeline.py::test_what_counts_against_the_limit shows a spec change and a
    # resume; `rayqueue rerun` stamps rayqueue/restartedAt.
    retry = {"limit": 1, "backoffSeconds": 1}
    w = PlanWorld({"a": task(retry=retry)})
    for _ in range(2):  # the first run and its one retry both fail
        for _ in range(5):
            w.step()
            if w.phase("a") is Phase.STARTING:
                break
        w.ray("a", RUNNING)
        w.step()
        w.ray("a", FAILED)
        w.step(2)
    body = w.status("a")
    assert body.phase is Phase.FAILED and body.reason == Reason.BACKOFF_LIMIT_EXCEEDED
    assert body.retries == 1
    w.specs["a"] = task(retry=retry, annotations={"rayqueue/restartedAt": "2026-01-02T00:00:00Z"})
    assert _starts(w.step()) == ["a"]
    assert w.status("a").retries == 0 and w.status("a").run == 3
    w.ray("a", RUNNING)
    w.step()
    w.ray("a", FAILED)
    w.step()
    assert w.status("a").reason == Reason.RETRY_BACKOFF  # its one retry is there again


# --- room stopping for a preemptor that is gone goes to the next head -------------------------


def test_room_stopping_for_a_deleted_preemptor_goes_to_the_next_head_without_more_victims() -> None:
    w = Cluster(
        {f"low{i}": task(0, 1) for i in range(4)},
        options=PlanOptions(policy="backfill", preemption="LowerPriority"),
    )
    w.step()
    w.run_all()
    w.now += timedelta(seconds=600)
    w.specs["urgent"] = task(9, 2)
    p = w.step()
    assert [d.victims for d in p.preemptions] == [("low0", "low1")]
    del w.specs["urgent"]  # gone while its victims still stop
    w.specs["other"] = task(8, 2)
    for _ in range(3):
        p = w.step()
        assert p.preemptions == [] and p.submits == []
        assert w.phase("low2") is Phase.RUNNING and w.phase("low3") is Phase.RUNNING
    w.finish_stops()
    assert _starts(w.step()) == ["other"]
