"""Charging what is held (reconciler/core/charges.py): each live job counts for the more of
what it declares and what Ray says it holds, in every consumer (admission, quota usage,
backfill's estimate, preemption), the free room stays within what Ray reports available, jobs
not ours count by what they hold, and a task that waits for it says so with the numbers."""

from __future__ import annotations

from datetime import timedelta

from reconciler.core.admit import free_capacity
from reconciler.core.inputs import Observation
from reconciler.core.task.jobs import charged
from specs.cluster import PENDING, RUNNING, SUCCEEDED, Capacity, RayJob
from specs.settings.process import PlanOptions
from specs.task.models import Phase, Reason
from tests.support.planner_world import GIB, Cluster, PlanWorld, running_cluster, task
from tests.unit.core.test_planner import started


def cpus(n: float) -> Capacity:
    return Capacity(n, 0, 0)


def sid_of(w: PlanWorld, name: str) -> str:
    sid = w.status(name).submission_id
    assert sid is not None
    return sid


def test_charged_is_the_more_of_declared_and_held_per_resource() -> None:
    declared = Capacity(1, 1, 4 * GIB)
    assert charged(declared, None) is declared
    assert charged(declared, Capacity(0.5, 0, GIB)) is declared  # holds less: keeps its word
    assert charged(declared, Capacity(8, 0, 2 * GIB)) == Capacity(8, 1, 4 * GIB)


def running(cpu_total: float = 4, **tasks: float) -> Cluster:
    """`tasks` (name: declared CPUs) running on a `cpu_total`-CPU cluster, backfill."""
    w = Cluster(
        {name: task(0, cpu) for name, cpu in tasks.items()},
        capacity=Capacity(cpu_total, 0, 64 * GIB),
        options=PlanOptions(policy="backfill"),
    )
    w.step()
    w.run_all()
    assert all(w.phase(n) is Phase.RUNNING for n in tasks)
    return w


# --- admission -------------------------------------------------------------------------------


def test_admission_waits_for_what_a_job_holds_beyond_its_declaration() -> None:
    w = running(**{"team-b/train": 1})
    w.specs["next"] = task(0, 1)
    w.held[sid_of(w, "team-b/train")] = cpus(4)  # its driver started 4 CPUs of workers
    p = w.step()
    assert started(p) == []
    body = w.status("next")
    assert body.reason == Reason.WAITING_FOR_RESOURCES
    assert body.message is not None and body.message.startswith(
        "cluster full in fact: team-b/train holds 4 CPU, declared 1; needs 1 CPU; 0 free"
    )
    assert p.summary is not None and p.summary.used.cpu == 4
    w.held.clear()  # the workers are gone: the declaration counts again
    assert started(w.step()) == ["next"]


def test_a_task_that_would_not_fit_the_declarations_either_waits_as_before() -> None:
    w = running(**{"team-b/train": 1})
    w.specs["big"] = task(0, 4)  # 3 CPUs are free by the declarations: not enough anyway
    w.held[sid_of(w, "team-b/train")] = cpus(2)
    w.step()
    message = w.status("big").message
    assert message is not None and message.startswith("needs 4 CPU; 2 free; first in queue")


# --- quota usage and borrowing ---------------------------------------------------------------

TEAMS = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 4}
    - name: team-b
      nominalQuota: {cpu: 4}
      borrowingLimit: {cpu: 0}
"""


def test_quota_usage_counts_what_a_queue_s_jobs_hold() -> None:
    w = running_cluster({"team-b/train": task(0, 1)}, TEAMS, cpus=8)
    w.held[sid_of(w, "team-b/train")] = cpus(4)
    w.specs["team-b/more"] = task(0, 1)
    p = w.step()
    assert started(p) == []
    assert p.summary is not None and p.summary.queues is not None
    assert p.summary.queues.states["team-b"].usage.cpu == 4
    body = w.status("team-b/more")
    assert body.reason == Reason.QUOTA_EXCEEDED
    assert body.message is not None and body.message.startswith("team-b uses 4/4 CPU")


# --- backfill's estimate ---------------------------------------------------------------------


def test_backfill_s_reserved_start_waits_for_the_over_holder_s_end() -> None:
    # 4 CPUs: "long" declares 1 and holds 2 until its timeout (200 s); "short" declares 2
    # until 100 s. "front" asks 3: by the declarations 2 more are free at 100 s (3 then), as
    # charged only 2 are, and 4 at 200 s.
    w = Cluster(
        {"long": task(0, 1, timeoutSeconds=200), "short": task(0, 2, timeoutSeconds=100)},
        capacity=Capacity(4, 0, 64 * GIB),
        options=PlanOptions(policy="backfill"),
    )
    w.step()
    w.run_all()
    started_at = w.status("long").started_at
    assert started_at is not None and w.status("short").started_at == started_at
    w.specs["front"] = task(5, 3)
    w.step()
    assert w.status("front").estimated_start_at == started_at + timedelta(seconds=100)
    w.held[sid_of(w, "long")] = cpus(2)
    w.step()
    assert w.status("front").estimated_start_at == started_at + timedelta(seconds=200)


# --- preemption's arithmetic -----------------------------------------------------------------


def test_preemption_counts_what_a_victim_holds() -> None:
    # By the declarations "a" (the cheaper by name) frees enough; as charged, "z" holds 3 of
    # the 4 CPUs, and only it frees enough on its own.
    w = running_cluster(
        {"a": task(0, 1), "z": task(0, 1)}, None, cpus=4, preemption="LowerPriority"
    )
    w.specs["urgent"] = task(9, 3)
    before = Cluster(dict(w.specs), capacity=w.capacity, options=w.options)
    before.jobs, before.statuses, before.now = dict(w.jobs), dict(w.statuses), w.now
    declared = before.step()
    assert [d.victims for d in declared.preemptions] == [("a",)]
    w.held[sid_of(w, "z")] = cpus(3)
    p = w.step()
    assert [(d.victims, d.free.cpu) for d in p.preemptions] == [(("z",), 0)]


def test_a_stopping_victim_reserves_what_it_holds() -> None:
    # While a victim that holds 3 CPUs stops, its preemptor's room counts those 3 (not its
    # declared 1) as coming back: the small task behind may take the CPU left over.
    w = running_cluster(
        {"a": task(0, 1), "z": task(0, 1)}, None, cpus=4, preemption="LowerPriority"
    )
    w.held[sid_of(w, "z")] = cpus(3)
    w.specs["urgent"] = task(9, 3)
    p = w.step()
    assert [d.victims for d in p.preemptions] == [("z",)]
    w.specs["small"] = task(5, 1)
    p = w.step()  # z still stops (Cluster keeps it live): it holds 3 until it ends
    assert started(p) == []
    w.finish_stops()
    w.held.clear()
    p = w.step()
    assert started(p) == ["urgent"]


# --- jobs not ours ---------------------------------------------------------------------------


def test_a_foreign_job_counts_by_what_it_holds_by_default() -> None:
    w = PlanWorld({"a": task(0, 2)}, capacity=Capacity(4, 0, 16 * GIB))
    w.jobs["raysubmit_x"] = RayJob("raysubmit_x", RUNNING, entrypoint_cpus=0.5)
    w.held["raysubmit_x"] = cpus(3)
    w.step()
    assert w.phase("a") is Phase.QUEUED
    assert w.status("a").message is not None and w.status("a").message.startswith(
        "cluster full in fact: job raysubmit_x holds 3 CPU, declared 0.5; needs 2 CPU; 1 free"
    )
    del w.held["raysubmit_x"]  # not observed, not counted (RAYQUEUE_COUNT_FOREIGN_JOBS off)
    assert started(w.step()) == ["a"]


def test_a_driver_ray_lists_no_job_for_counts_by_what_it_holds() -> None:
    w = PlanWorld({"a": task(0, 2)}, capacity=Capacity(4, 0, 16 * GIB))
    w.held["02000000"] = cpus(3)
    w.step()
    assert w.phase("a") is Phase.QUEUED
    assert w.status("a").message is not None
    assert "job 02000000 holds 3 CPU, declared 0" in w.status("a").message


def test_counted_foreign_jobs_count_the_more_of_their_reservation_and_holdings() -> None:
    options = PlanOptions(count_foreign_jobs=True)
    job = RayJob("raysubmit_x", RUNNING, entrypoint_cpus=2)
    observed = Observation({"raysubmit_x": job}, Capacity(8, 0, 0))
    assert free_capacity(observed, options, Capacity(), Capacity()) == Capacity(6, 0, 0)
    held = Observation({"raysubmit_x": job}, Capacity(8, 0, 0), held={"raysubmit_x": cpus(1)})
    assert free_capacity(held, options, Capacity(), Capacity()) == Capacity(6, 0, 0)
    more = Observation({"raysubmit_x": job}, Capacity(8, 0, 0), held={"raysubmit_x": cpus(5)})
    assert free_capacity(more, options, Capacity(), Capacity()) == Capacity(3, 0, 0)


# --- what Ray reports available --------------------------------------------------------------


def test_free_room_is_never_more_than_ray_reports_available() -> None:
    w = PlanWorld({"a": task(0, 2), "b": task(0, 1)}, capacity=Capacity(4, 0, 16 * GIB))
    w.ray_available = Capacity(1, 0, 16 * GIB)  # something unseen holds 3 CPUs
    w.options = PlanOptions(policy="besteffort")
    p = w.step()
    assert started(p) == ["b"]
    message = w.status("a").message
    assert message is not None and message.startswith(
        "cluster full in fact: Ray reports 1 CPU available, less than the declarations "
        "leave; needs 2 CPU; 1 free"
    )


def test_runs_not_started_are_taken_from_ray_s_report() -> None:
    # "a" was submitted and Ray still has it PENDING: Ray's report does not show its CPUs
    # yet, so they are taken from it; once Ray's holdings show it, they are not taken twice.
    w = PlanWorld({"a": task(0, 2)}, capacity=Capacity(4, 0, 16 * GIB))
    w.options = PlanOptions(policy="besteffort")
    w.ray_available = Capacity(4, 0, 16 * GIB)
    w.step()
    assert w.jobs[sid_of(w, "a")].status == PENDING
    w.specs["b"] = task(0, 3)
    w.step()
    assert w.phase("b") is Phase.QUEUED  # 4 reported, 2 of them promised to "a"
    w.specs["c"] = task(0, 2)
    w.ray("a", RUNNING)
    w.held[sid_of(w, "a")] = cpus(2)
    w.ray_available = Capacity(2, 0, 16 * GIB)
    p = w.step()
    assert started(p) == ["c"]  # not b: 3 CPUs do not fit the 2 left


def test_what_an_ended_job_held_comes_back_before_ray_is_read_again() -> None:
    w = running(**{"big": 3})
    w.held[sid_of(w, "big")] = cpus(3)
    w.ray_available = Capacity(1, 0, 64 * GIB)
    w.specs["next"] = task(0, 4)
    w.step()
    assert w.phase("next") is Phase.QUEUED
    w.ray("big", SUCCEEDED)  # Ray's holdings and report are from before it ended
    assert started(w.step()) == ["next"]


# --- nothing observed: the plans of before ---------------------------------------------------


def test_without_holdings_or_report_the_room_is_the_declarations() -> None:
    observed = Observation({}, Capacity(4, 0, 0))
    assert free_capacity(observed, PlanOptions(), cpus(3), cpus(1)) == Capacity(1, 0, 0)
