"""A victim's `preemptedBy` names its preemptor only where the victim's folder may see it;
otherwise it holds a reference that only the planner resolves (reconciler.core.task.
preemptedby). The victim's status is a file its team may write, so a `preemptedBy` the
planner did not record changes nothing for another folder's task."""

from __future__ import annotations

from dataclasses import replace

import yaml

from reconciler.core.task.preemptedby import Preemptors, record, reference
from specs.cluster import META_TASK, RUNNING, STOPPED, SUCCEEDED, Capacity
from specs.settings.process import PlanOptions
from specs.task.models import Phase, Reason
from specs.task.status import TaskStatus, TaskStatusBody
from specs.task.visibility import ANOTHER_FOLDER, Visibility
from tests.support.planner_world import GIB, Cluster, task

OWN = Visibility(readers=(("team-a",), ("team-b",)), writers=(("team-a",), ("team-b",)))
OPTIONS = replace(
    PlanOptions(preemption="LowerPriority", preemption_grace_seconds=0), visibility=OWN
)


def _text(w: Cluster, name: str) -> str:
    """The victim's sidecar as the loop writes it."""
    return yaml.safe_dump(w.statuses[name].to_document())


def _forge(w: Cluster, name: str, **fields: object) -> None:
    """`name`'s team edits its own status file."""
    status = w.statuses[name]
    w.statuses[name] = TaskStatus(
        metadata=status.metadata, status=status.status.model_copy(update=fields)
    )


def _preempted(capacity: float = 4) -> Cluster:
    """team-a/low (4 CPUs) running; team-b/urgent (priority 9, 4 CPUs) preempts it; the
    victim's job still live (its stop not yet through)."""
    w = Cluster(
        {"team-a/low": task(priority=0, cpu=4)},
        capacity=Capacity(capacity, 0, 16 * GIB),
        options=OPTIONS,
    )
    w.step()
    w.ray("team-a/low", RUNNING)
    w.step(seconds=600)
    w.specs["team-b/urgent"] = task(priority=9, cpu=4)
    plan = w.step()
    assert [(p.preemptor, p.victims) for p in plan.preemptions] == [
        ("team-b/urgent", ("team-a/low",))
    ]
    return w


def test_the_victims_status_names_no_preemptor_of_another_folder_and_the_preemption_completes() -> (
    None
):
    w = _preempted()
    victim = w.status("team-a/low")
    assert victim.preempted_by is not None and victim.preempted_by.startswith(ANOTHER_FOLDER)
    assert victim.preempted_by == reference("team-a/low", w.status("team-b/urgent"))
    assert "team-b" not in _text(w, "team-a/low") and "urgent" not in _text(w, "team-a/low")
    # The preemptor waits for it, with its room reserved; the victim waits for its run to go.
    w.step()
    assert w.status("team-b/urgent").reason == Reason.PREEMPTING
    assert w.status("team-b/urgent").message.startswith("preempted a task of another folder;")
    assert w.status("team-a/low").reason == Reason.PREEMPTED
    assert "team-b" not in _text(w, "team-a/low")
    # The victim's run is gone: the preemptor starts, the victim waits in its old place.
    w.finish_stops()
    plan = w.step()
    assert [s.task for s in plan.submits] == ["team-b/urgent"]
    assert "team-b" not in _text(w, "team-a/low")
    w.run_all()
    w.ray("team-b/urgent", SUCCEEDED)
    plan = w.step()
    assert [s.task for s in plan.submits] == ["team-a/low"]
    w.run_all()
    body = w.status("team-a/low")
    assert body.phase is Phase.RUNNING and body.preempted_by is None and body.preemptions == 1


def test_within_a_folder_the_victim_names_its_preemptor() -> None:
    urgent = TaskStatusBody(Phase.QUEUED, uid="u1")
    assert record(OWN, "team-a/low", "team-a/urgent", urgent) == "team-a/urgent"
    assert record(Visibility(), "team-a/low", "team-b/urgent", urgent) == "team-b/urgent"
    assert record(OWN, "team-a/low", "team-b/urgent", urgent).startswith(ANOTHER_FOLDER)


def test_a_reference_resolves_only_to_the_preemptor_waiting_for_that_very_victim() -> None:
    waiting = TaskStatusBody(Phase.QUEUED, reason=Reason.PREEMPTING, uid="u1", run=2)
    bodies = {"team-b/urgent": waiting}
    preemptors = Preemptors(OWN, lambda: bodies.items())
    ref = reference("team-a/low", waiting)

    def of(victim: str, by: str) -> str | None:
        return preemptors.of(victim, TaskStatusBody(Phase.QUEUED, preempted_by=by))

    assert of("team-a/low", ref) == "team-b/urgent"
    assert of("team-a/other", ref) is None  # copied into another task's file
    assert of("team-a/low", "team-b/urgent") is None  # a name the planner never records
    assert of("team-a/low", "team-a/mine") == "team-a/mine"  # its own folder's, as before
    assert of("team-a/low", f"{ANOTHER_FOLDER} (0123456789abcdef)") is None
    # Once the preemptor no longer waits as one (it started, or runs again later), an old
    # reference names nobody.
    bodies["team-b/urgent"] = waiting._replace(reason=Reason.WAITING_FOR_RESOURCES)
    assert (
        Preemptors(OWN, lambda: bodies.items()).of(
            "team-a/low", TaskStatusBody(Phase.QUEUED, preempted_by=ref)
        )
        is None
    )


def test_a_forged_preempted_by_does_not_make_another_folders_task_wait() -> None:
    """team-a edits its running task's status to say team-b/urgent preempted it: were it
    believed, team-b/urgent would wait for that run to stop, with room reserved."""
    w = Cluster(
        {"team-a/mine": task(priority=0, cpu=2)},
        capacity=Capacity(4, 0, 16 * GIB),
        options=replace(OPTIONS, preemption="Never"),
    )
    w.step()
    w.ray("team-a/mine", RUNNING)
    w.step()
    w.specs["team-b/urgent"] = task(priority=9, cpu=4)
    w.step()
    assert w.status("team-b/urgent").reason == Reason.WAITING_FOR_RESOURCES
    _forge(
        w,
        "team-a/mine",
        phase=Phase.QUEUED,
        reason=Reason.PREEMPTED,
        preempted_by="team-b/urgent",
        started_at=None,
    )
    for _ in range(2):
        w.step()
        urgent = w.status("team-b/urgent")
        assert urgent.reason == Reason.WAITING_FOR_RESOURCES, urgent
        assert "preempted" not in (urgent.message or ""), urgent.message
        # team-a's own task still waits for its run to be gone before it runs again.
        assert w.status("team-a/mine").phase is not Phase.STARTING


def test_a_copied_reference_adds_no_victim_to_the_preemptor() -> None:
    """team-a copies the genuine reference of its preempted task into another of its tasks,
    whose run is still live: team-b/urgent does not wait for that run too."""
    w = Cluster(
        {
            "team-a/low": task(priority=0, cpu=4),
            "team-a/other": task(priority=0, cpu=2, preemptible=False),
        },
        capacity=Capacity(8, 0, 16 * GIB),
        options=OPTIONS,
    )
    w.step()
    w.ray("team-a/low", RUNNING)
    w.ray("team-a/other", RUNNING)
    w.step(seconds=600)
    w.specs["team-b/urgent"] = task(priority=9, cpu=4)
    plan = w.step()
    assert [p.victims for p in plan.preemptions] == [("team-a/low",)]
    _forge(
        w,
        "team-a/other",
        phase=Phase.QUEUED,
        reason=Reason.PREEMPTED,
        preempted_by=w.status("team-a/low").preempted_by,
        started_at=None,
    )
    w.step()
    message = w.status("team-b/urgent").message or ""
    assert message.startswith("preempted a task of another folder;"), message  # one victim
    # team-a/low's run is gone, team-a/other's still live: team-b/urgent starts.
    for job_id in sorted(w.stopping):
        if w.jobs[job_id].metadata.get(META_TASK) == "team-a/low":
            w.jobs[job_id] = replace(w.jobs[job_id], status=STOPPED)
            w.stopping.discard(job_id)
    assert any(w.jobs[j].metadata.get(META_TASK) == "team-a/other" for j in w.stopping)
    plan = w.step()
    assert "team-b/urgent" in [s.task for s in plan.submits], w.status("team-b/urgent")
