"""Fault 9, foreign jobs: Ray jobs without our queue's metadata are never stopped or adopted;
with --count-foreign-jobs their declared entrypoint resources come off free capacity."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_QUEUE, META_TASK, RUNNING, Capacity, RayJob
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.reliability.conftest import stop_queue_jobs
from tests.support.specs import read_status, write_task
from tests.support.world import World


def foreign(sid: str, cpu: float = 0, **metadata: str) -> RayJob:
    return RayJob(sid, RUNNING, "python theirs.py", metadata=metadata, entrypoint_cpus=cpu)


def test_foreign_jobs_are_never_stopped_or_adopted(make_world: Callable[..., World]) -> None:
    world = make_world(allow_mass_delete=True)
    others = [
        foreign("raysubmit_plain"),
        foreign("rq-train-deadbeef-1", **{META_TASK: "train"}),  # our naming, no queue id
        foreign("other-queue-job", **{META_QUEUE: "another-queue", META_TASK: "train"}),
        foreign("taken-id"),
    ]
    for job in others:
        world.ray.add_job(job)
    world.write("train", "python train.py")
    world.write("clash", "python clash.py", submissionId="taken-id")
    world.step(passes=2)
    train = world.status("train")
    assert train["submissionId"] not in {j.submission_id for j in others}  # not adopted
    clash = world.status("clash")
    assert clash["phase"] == "Failed" and clash["reason"] == "SubmissionIdConflict"
    # Every spec deleted, mass deletion allowed: still only our own job is stopped.
    for path in world.tasks.glob("*.yaml"):
        if not path.name.endswith(".status.yaml"):
            path.unlink()
    world.step(passes=3)
    assert all(world.ray.jobs[j.submission_id].status == RUNNING for j in others)
    assert all(world.ray.jobs[j.submission_id].metadata == j.metadata for j in others)
    assert world.ray.calls["stop"] == 1


def test_count_foreign_jobs_subtracts_their_entrypoint_resources(
    make_world: Callable[..., World],
) -> None:
    world = make_world(capacity=Capacity(4, 0, 16 * 2**30), count_foreign_jobs=True)
    world.ray.add_job(foreign("theirs", cpu=3))
    world.write("big", "python big.py", resources={"cpu": 2})
    world.step()
    status = world.status("big")
    assert status["phase"] == "Queued" and status["reason"] == "WaitingForResources"
    assert "1 free" in status["message"]
    world.ray.set_status("theirs", "SUCCEEDED")
    world.step()
    assert world.status("big")["phase"] == "Starting"

    plain = make_world(capacity=Capacity(4, 0, 16 * 2**30))  # the option off: not counted
    plain.ray.add_job(foreign("theirs", cpu=3))
    plain.write("big", "python big.py", resources={"cpu": 2})
    plain.step()
    assert plain.status("big")["phase"] == "Starting"


@pytest.fixture
def foreign_job(ray_head: str) -> Iterator[tuple[RayJobsAdapter, str]]:
    """A job submitted to the real head by someone else: 2 CPUs for its entrypoint."""
    ray = RayJobsAdapter(ray_head, timeout_seconds=10)
    client = ray._get_client()
    sid = f"foreign-{uuid.uuid4().hex[:8]}"
    client.submit_job(
        entrypoint="python -c 'import time; time.sleep(120)'",
        submission_id=sid,
        entrypoint_num_cpus=2,
        metadata={"owner": "someone else"},
    )
    yield ray, sid
    ray.stop(sid)


@pytest.mark.ray
def test_real_foreign_job_counted_and_left_alone(
    foreign_job: tuple[RayJobsAdapter, str], ray_head: str, tmp_path: Path
) -> None:
    ray, sid = foreign_job
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    queue = f"rel-foreign-{uuid.uuid4().hex[:6]}"
    settings = Settings(
        tasks_dir=tasks, queue_id=queue, api=False, count_foreign_jobs=True, allow_mass_delete=True
    )
    counting = RayJobsAdapter(ray_head, timeout_seconds=10, entrypoint_resources=True)
    reconciler = Reconciler(settings, TaskStore(tasks), counting)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            job = next(j for j in counting.list_jobs() if j.submission_id == sid)
            if job.status == RUNNING and job.entrypoint_cpus == 2:
                break
            time.sleep(0.3)
        assert job.entrypoint_cpus == 2, job  # read from the job's supervisor actor
        write_task(tasks, "wide", "python -c 'print(1)'", resources={"cpu": 3})
        reconciler.run_pass()
        status = read_status(tasks, "wide")
        assert status["reason"] == "WaitingForResources", status  # 4 CPUs, 2 of them theirs
        (tasks / "wide.yaml").unlink()
        for _ in range(3):
            reconciler.run_pass()
        assert ray.job_info(sid).status == RUNNING
        assert ray.job_info(sid).metadata == {"owner": "someone else"}
    finally:
        stop_queue_jobs(ray, queue)
