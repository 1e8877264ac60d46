"""Prometheus metrics: values from passes, bounded labels, transition counters, Ray call counts."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from reconciler.shell.ops.metrics import CountingRayAdapter, QueueMetrics
from reconciler.shell.ops.runhistory import QueueUse
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity, JobNotFound, RayUnavailable
from specs.queues.config import QueueConfig
from specs.task.models import Condition, Metadata, Phase
from specs.task.status import TaskStatus, TaskStatusBody

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def status(phase: Phase, **body: object) -> TaskStatus:
    return TaskStatus(metadata=Metadata(), status=TaskStatusBody(phase=phase, **body))


def samples(metrics: QueueMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.exposition().body.decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(metrics: QueueMetrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, tuple(sorted(labels.items()))))


def observe(metrics: QueueMetrics, before: dict, after: dict, **kw: object) -> None:
    metrics.observe_pass(
        before,
        after,
        capacity=kw.pop("capacity", Capacity(4, 0, 8)),  # type: ignore[arg-type]
        reserved=kw.pop("reserved", Capacity(1, 0, 0)),  # type: ignore[arg-type]
        ray_available=kw.pop("ray_available", True),  # type: ignore[arg-type]
        priorities=kw.pop("priorities", None),  # type: ignore[arg-type]
        submitted=kw.pop("submitted", frozenset()),  # type: ignore[arg-type]
    )


def test_gauges_count_pending_by_reason_and_running() -> None:
    m = QueueMetrics("1.2.3")
    after = {
        "a": status(Phase.QUEUED, reason="WaitingForResources"),
        "b": status(Phase.QUEUED, reason="WaitingForResources"),
        "c": status(Phase.QUEUED, reason="InflightLimit"),
        "d": status(Phase.RUNNING),
        "e": status(Phase.STARTING),
        "f": status(Phase.UNSCHEDULABLE, reason="Unschedulable"),
    }
    observe(m, {}, after, capacity=Capacity(4, 1, 8 * 2**30), reserved=Capacity(2, 0, 2**30))
    labels = {"queue": "default"}
    assert value(m, "rayqueue_pending_tasks", reason="WaitingForResources", **labels) == 2
    assert value(m, "rayqueue_pending_tasks", reason="InflightLimit", **labels) == 1
    assert value(m, "rayqueue_pending_tasks", reason="Unschedulable", **labels) == 1
    assert value(m, "rayqueue_running_tasks", **labels) == 2
    assert value(m, "rayqueue_cluster_capacity", resource="memory") == 8 * 2**30
    assert value(m, "rayqueue_cluster_reserved", resource="cpu") == 2
    assert value(m, "rayqueue_ray_available") == 1
    assert value(m, "rayqueue_build_info", version="1.2.3") == 1
    # Next pass: everything ran; the old label sets drop to 0 instead of vanishing.
    observe(m, after, {"a": status(Phase.RUNNING)}, ray_available=False)
    assert value(m, "rayqueue_pending_tasks", reason="InflightLimit", **labels) == 0
    assert value(m, "rayqueue_running_tasks", **labels) == 1
    assert value(m, "rayqueue_ray_available") == 0


def series_after(tasks: int) -> tuple[QueueMetrics, dict]:
    m = QueueMetrics("0")
    after = {
        f"task-{i}": status(Phase.QUEUED if i % 2 else Phase.RUNNING, reason="WaitingForResources")
        for i in range(tasks)
    }
    observe(m, {}, after)
    before = after
    after = {name: status(Phase.SUCCEEDED, run=1) for name in before}
    observe(m, before, after)
    return m, samples(m)


def test_no_label_grows_with_the_number_of_tasks() -> None:
    # The label sets known in advance (10 priorities x the wait buckets, each Ray call x
    # result, ...) are a fixed few hundred; 10,000 tasks add none to what 10 make.
    m, series = series_after(10_000)
    assert series.keys() == series_after(10)[1].keys()
    assert len(series) < 300
    assert not any("task-" in v for _, labels in series for _, v in labels)
    assert value(m, "rayqueue_finished_tasks_total", queue="default", phase="Succeeded") == 10_000


def test_counters_count_transitions_once_and_not_on_restart() -> None:
    m = QueueMetrics("0")
    queued = status(Phase.QUEUED, queued_at=T0)
    starting = status(Phase.STARTING, queued_at=T0, submitted_at=T0 + timedelta(seconds=42), run=1)
    failed = status(Phase.FAILED, queued_at=T0, submitted_at=T0 + timedelta(seconds=42), run=1)
    observe(m, {}, {"a": failed})  # a restart reads a finished sidecar: not counted
    assert value(m, "rayqueue_finished_tasks_total", queue="default", phase="Failed") == 0
    observe(m, {"a": queued}, {"a": starting}, priorities={"a": 7})
    observe(m, {"a": starting}, {"a": failed}, priorities={"a": 7})
    observe(m, {"a": failed}, {"a": failed})  # unchanged: the same object
    assert value(m, "rayqueue_finished_tasks_total", queue="default", phase="Failed") == 1
    wait = {"queue": "default", "priority": "7"}
    assert value(m, "rayqueue_admission_wait_time_seconds_count", **wait) == 1
    assert value(m, "rayqueue_admission_wait_time_seconds_sum", **wait) == 42
    assert value(m, "rayqueue_admission_wait_time_seconds_bucket", le="60.0", **wait) == 1
    assert value(m, "rayqueue_admission_wait_time_seconds_bucket", le="30.0", **wait) == 0
    lost = status(Phase.QUEUED, lost_restarts=1, run=1)
    observe(m, {"a": status(Phase.RUNNING, run=1)}, {"a": lost})
    assert value(m, "rayqueue_retries_total", queue="default") == 1
    backoff = status(Phase.QUEUED, reason="RetryBackoff", retries=2, run=2)
    observe(m, {"a": status(Phase.RUNNING, retries=1, run=2)}, {"a": backoff})
    assert value(m, "rayqueue_retries_total", queue="default") == 2
    observe(m, {"a": backoff}, {"a": status(Phase.QUEUED, retries=0, run=2)})  # a reset
    assert value(m, "rayqueue_retries_total", queue="default") == 2


def test_pass_duration_is_a_histogram() -> None:
    m = QueueMetrics("0")
    with m.time_pass():
        pass
    assert value(m, "rayqueue_pass_duration_seconds_count") == 1


def test_ray_calls_are_counted_by_call_and_result() -> None:
    m = QueueMetrics("0")
    fake = FakeRay()
    ray = CountingRayAdapter(fake, m)
    ray.list_jobs()
    ray.capacity()
    with pytest.raises(JobNotFound):
        ray.logs("nope")
    fake.available = False
    with pytest.raises(RayUnavailable):
        ray.list_jobs()
    assert value(m, "rayqueue_ray_calls_total", call="list_jobs", result="ok") == 1
    assert value(m, "rayqueue_ray_calls_total", call="list_jobs", result="unavailable") == 1
    assert value(m, "rayqueue_ray_calls_total", call="logs", result="not_found") == 1
    assert value(m, "rayqueue_ray_calls_total", call="capacity", result="ok") == 1


def test_registry_is_private() -> None:
    from prometheus_client import REGISTRY

    first, second = QueueMetrics("a"), QueueMetrics("b")  # two in one process: no clash
    assert value(first, "rayqueue_build_info", version="a") == 1
    assert value(second, "rayqueue_build_info", version="a") is None
    assert "rayqueue_pending_tasks" not in {m.name for m in REGISTRY.collect()}


def test_task_metrics_carry_the_status_queue() -> None:
    m = QueueMetrics("0")
    queued = status(Phase.QUEUED, reason="QuotaExceeded", queue="team-a", queued_at=T0)
    started = status(
        Phase.STARTING, queue="team-a", queued_at=T0, submitted_at=T0 + timedelta(seconds=5)
    )
    done = status(Phase.SUCCEEDED, queue="org/team-b", run=1)
    observe(m, {}, {"a": queued, "b": status(Phase.RUNNING, queue="org/team-b"), "c": queued})
    assert value(m, "rayqueue_pending_tasks", queue="team-a", reason="QuotaExceeded") == 2
    assert value(m, "rayqueue_running_tasks", queue="org/team-b") == 1
    assert value(m, "rayqueue_running_tasks", queue="default") is None
    observe(
        m,
        {"a": queued, "b": status(Phase.RUNNING, queue="org/team-b", run=1)},
        {"a": started, "b": done},
        priorities={"a": 3},
    )
    wait = {"queue": "team-a", "priority": "3"}
    assert value(m, "rayqueue_admission_wait_time_seconds_sum", **wait) == 5
    assert value(m, "rayqueue_finished_tasks_total", queue="org/team-b", phase="Succeeded") == 1
    assert value(m, "rayqueue_pending_tasks", queue="team-a", reason="QuotaExceeded") == 0
    assert value(m, "rayqueue_running_tasks", queue="team-a") == 1


@dataclass(frozen=True)
class Figures:
    nominal: Capacity
    usage: Capacity
    borrowed: Capacity
    share: float


def test_queue_gauges_follow_the_config() -> None:
    m = QueueMetrics("0")
    a = Figures(Capacity(2, 0, 4 * 2**30), Capacity(3, 0, 2**30), Capacity(1, 0, 0), 0.75)
    b = Figures(Capacity(1, 1, 0), Capacity(), Capacity(), 0.0)
    m.observe_queues({"team-a": a, "org/team-b": b})
    assert value(m, "rayqueue_queue_nominal_quota", queue="team-a", resource="memory") == 4 * 2**30
    assert value(m, "rayqueue_queue_nominal_quota", queue="org/team-b", resource="gpu") == 1
    assert value(m, "rayqueue_queue_usage", queue="team-a", resource="cpu") == 3
    assert value(m, "rayqueue_queue_borrowed", queue="team-a", resource="cpu") == 1
    assert value(m, "rayqueue_queue_weighted_share", queue="team-a") == 0.75
    assert value(m, "rayqueue_queue_weighted_share", queue="org/team-b") == 0
    # team-b leaves the config: its series go; team-a's follow the new figures.
    m.observe_queues({"team-a": Figures(a.nominal, Capacity(), Capacity(), 0.0)})
    assert value(m, "rayqueue_queue_usage", queue="team-a", resource="cpu") == 0
    assert value(m, "rayqueue_queue_nominal_quota", queue="org/team-b", resource="gpu") is None
    assert value(m, "rayqueue_queue_weighted_share", queue="org/team-b") is None
    m.observe_queues({})  # the config file is gone
    assert not any(name.startswith("rayqueue_queue_") for name, _ in samples(m))


def test_preempted_tasks_count_by_victim_queue_and_reason() -> None:
    m = QueueMetrics("1.2.3")

    def preempted(reason: str, count: int, queue: str) -> TaskStatus:
        cond = Condition(type="Preempted", reason=reason, message="by x", last_transition_time=T0)
        return status(
            Phase.QUEUED,
            reason="Preempted",
            preemptions=count,
            preempted_by="x",
            queue=queue,
            conditions=[cond],
        )

    running = status(Phase.RUNNING, queue="team-b")
    first = preempted("Reclaim", 1, "team-b")
    observe(m, {"v": running}, {"v": first})
    assert value(m, "rayqueue_preempted_tasks_total", queue="team-b", reason="Reclaim") == 1
    observe(m, {"v": first}, {"v": preempted("Reclaim", 1, "team-b")})  # same count: no news
    assert value(m, "rayqueue_preempted_tasks_total", queue="team-b", reason="Reclaim") == 1
    observe(m, {}, {"w": preempted("WithinQueue", 3, "team-a")})  # first sight: history
    # (team-a is in no configuration this test read, so its label sets did not exist before)
    assert value(m, "rayqueue_preempted_tasks_total", queue="team-a", reason="WithinQueue") is None
    again = status(Phase.RUNNING, queue="team-a", preemptions=3)
    observe(m, {"w": again}, {"w": preempted("WithinQueue", 4, "team-a")})
    assert value(m, "rayqueue_preempted_tasks_total", queue="team-a", reason="WithinQueue") == 1


def test_every_label_set_known_in_advance_is_at_zero_from_the_first_scrape() -> None:
    m = QueueMetrics("0")
    default = {"queue": "default"}
    for phase in ("Succeeded", "Failed", "TimedOut", "Stopped", "Lost"):
        assert value(m, "rayqueue_finished_tasks_total", phase=phase, **default) == 0
    assert value(m, "rayqueue_retries_total", **default) == 0
    assert value(m, "rayqueue_admitted_tasks_total", **default) == 0
    for reason in ("WithinQueue", "Reclaim", "InCohortFairSharing"):
        assert value(m, "rayqueue_preempted_tasks_total", reason=reason, **default) == 0
    for reason in ("Preempted", "SpecChanged", "Suspended"):
        assert value(m, "rayqueue_evicted_tasks_total", reason=reason, **default) == 0
    for priority in "0123456789":
        wait = {"priority": priority, **default}
        assert value(m, "rayqueue_admission_wait_time_seconds_count", **wait) == 0
        assert value(m, "rayqueue_admission_wait_time_seconds_bucket", le="+Inf", **wait) == 0
    assert value(m, "rayqueue_ray_calls_total", call="submit", result="error") == 0
    assert value(m, "rayqueue_ray_calls_total", call="list_jobs", result="ok") == 0
    assert value(m, "rayqueue_passes_total", kind="still") == 0
    # Neither Kueue nor the dashboard has a use for *_created series.
    assert "_created" not in m.exposition().body.decode()


def queue_config(text: str) -> QueueConfig:
    return QueueConfig.model_validate(yaml.safe_load(text))


TWO_TEAMS = """
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 2, memory: 4Gi}
      borrowingLimit: {cpu: 1, memory: 1Gi}
    - name: team-b
      nominalQuota: {cpu: 2}
      lendingLimit: {gpu: 0}
  default:
    lendingLimit: {cpu: 3}
"""


def test_queue_config_declares_its_queues_and_publishes_its_limits() -> None:
    m = QueueMetrics("0")
    assert value(m, "rayqueue_finished_tasks_total", queue="team-a", phase="Failed") is None
    m.observe_config(queue_config(TWO_TEAMS))
    for queue in ("team-a", "team-b", "default"):
        assert value(m, "rayqueue_finished_tasks_total", queue=queue, phase="Failed") == 0
        assert value(m, "rayqueue_admitted_tasks_total", queue=queue) == 0
    borrowing, lending = "rayqueue_queue_borrowing_limit", "rayqueue_queue_lending_limit"
    assert value(m, borrowing, queue="team-a", resource="cpu") == 1
    assert value(m, borrowing, queue="team-a", resource="memory") == 2**30
    assert value(m, borrowing, queue="team-a", resource="gpu") is None  # no limit: no series
    assert value(m, lending, queue="team-b", resource="gpu") == 0
    assert value(m, lending, queue="default", resource="cpu") == 3
    # A new configuration: team-c appears, team-a's borrowing limit goes.
    m.observe_config(queue_config(TWO_TEAMS.replace("team-a", "team-c")))
    assert value(m, "rayqueue_retries_total", queue="team-c") == 0
    assert value(m, borrowing, queue="team-a", resource="cpu") is None
    assert value(m, borrowing, queue="team-c", resource="cpu") == 1
    m.observe_config(None)
    assert not any(name in (borrowing, lending) for name, _ in samples(m))


def test_an_admission_in_the_pass_where_the_task_first_appears_is_timed() -> None:
    m = QueueMetrics("0")
    new = status(Phase.STARTING, queued_at=T0, submitted_at=T0 + timedelta(seconds=2), run=1)
    wait = {"queue": "default", "priority": "4"}
    # A sidecar first read on a restart is history: not timed, not counted.
    observe(m, {}, {"old": new}, priorities={"old": 4})
    assert value(m, "rayqueue_admission_wait_time_seconds_count", **wait) == 0
    observe(m, {}, {"new": new}, priorities={"new": 4}, submitted={"new"})
    assert value(m, "rayqueue_admission_wait_time_seconds_count", **wait) == 1
    assert value(m, "rayqueue_admission_wait_time_seconds_sum", **wait) == 2
    assert value(m, "rayqueue_admitted_tasks_total", queue="default") == 1


def test_evictions_count_runs_put_back_by_reason() -> None:
    m = QueueMetrics("0")
    running = status(Phase.RUNNING, run=1)
    observe(m, {"a": running}, {"a": status(Phase.SUSPENDED, reason="Suspended", run=1)})
    observe(m, {"b": running}, {"b": status(Phase.QUEUED, reason="SpecChanged", run=2)})
    observe(m, {"c": running}, {"c": status(Phase.FAILED, reason="JobFailed", run=1)})
    queued = status(Phase.QUEUED, reason="WaitingForResources")
    observe(m, {"d": queued}, {"d": status(Phase.SUSPENDED, reason="Suspended")})
    labels = {"queue": "default"}
    assert value(m, "rayqueue_evicted_tasks_total", reason="Suspended", **labels) == 1
    assert value(m, "rayqueue_evicted_tasks_total", reason="SpecChanged", **labels) == 1
    assert value(m, "rayqueue_evicted_tasks_total", reason="Preempted", **labels) == 0


def test_queue_usage_has_kueues_name_and_keeps_the_old_one() -> None:
    m = QueueMetrics("0")
    m.observe_queues({"team-a": Figures(Capacity(2), Capacity(3), Capacity(1), 0.5)})
    assert value(m, "rayqueue_queue_resource_usage", queue="team-a", resource="cpu") == 3
    assert value(m, "rayqueue_queue_usage", queue="team-a", resource="cpu") == 3


def test_the_docs_table_states_every_registered_metric_with_its_type_and_labels() -> None:
    doc = (Path(__file__).parents[4] / "docs" / "observability.md").read_text()
    section = doc.split("## Prometheus metrics: `/metrics`")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `(rayqueue_\w+)` \| (\w+) \|([^|]*)\|", section, re.MULTILINE)
    documented = {name: (kind, set(re.findall(r"`(\w+)`", labels))) for name, kind, labels in rows}
    assert len(documented) == len(rows)  # no metric twice
    m = QueueMetrics("0")
    registered = {}
    # Every collector in the registry, whoever added it (the loop's metrics, the autoscaler's).
    for metric in m.registry._collector_to_names:
        suffix = "_total" if metric._type == "counter" else ""  # type: ignore[attr-defined]
        labels = set(metric._labelnames)  # type: ignore[attr-defined]
        registered[metric._name + suffix] = (metric._type, labels)  # type: ignore[attr-defined]
    assert documented == registered


def test_overusing_tasks_and_a_stop_for_overusing_counted_as_a_preemption() -> None:
    m = QueueMetrics("1.2.3")

    def flagged(reason: str, message: str) -> Condition:
        return Condition(type="Overusing", reason=reason, message=message, last_transition_time=T0)

    plain = status(Phase.RUNNING, queue="team-a", run=1)
    over = status(
        Phase.RUNNING, queue="team-a", run=1, conditions=[flagged("Overusing", "holds 8 CPU")]
    )
    observe(m, {}, {"a": plain})
    assert value(m, "rayqueue_overusing_tasks", queue="team-a") is None
    observe(m, {"a": plain}, {"a": over})
    assert value(m, "rayqueue_overusing_tasks", queue="team-a") == 1
    stopped = status(
        Phase.QUEUED,
        reason="QuotaExceeded",
        queue="team-a",
        run=2,
        preemptions=1,
        conditions=[flagged("OveruseStop", "stopped run 1")],
    )
    observe(m, {"a": over}, {"a": stopped})
    assert value(m, "rayqueue_overusing_tasks", queue="team-a") == 0
    assert value(m, "rayqueue_preempted_tasks_total", queue="team-a", reason="Overusing") == 1
    assert value(m, "rayqueue_evicted_tasks_total", queue="team-a", reason="Overusing") == 1


def test_each_queue_s_declared_and_held_totals_from_the_census() -> None:

    m = QueueMetrics("1.2.3")
    m.observe_holdings({"team-a": QueueUse(1, Capacity(1, 0, 0), Capacity(8, 0, 0))})
    assert value(m, "rayqueue_queue_declared", queue="team-a", resource="cpu") == 1
    assert value(m, "rayqueue_queue_held", queue="team-a", resource="cpu") == 8
    m.observe_holdings({})  # its runs ended
    assert value(m, "rayqueue_queue_held", queue="team-a", resource="cpu") == 0
