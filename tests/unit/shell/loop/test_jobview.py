"""Ray's jobs between full listings (reconciler/shell/loop/jobview.py): only the live jobs and the
ones just submitted are looked up; whatever else changes is seen at the next listing; and,
with no other client, every read equals a full listing at that moment."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest

from reconciler.shell.loop.jobview import JobView
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import (
    FAILED,
    RUNNING,
    SUCCEEDED,
    Capacity,
    RayJob,
    RayUnavailable,
    SubmitRequest,
)
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.support.clock import FakeClock
from tests.support.localhttp import QuietHandler, serving
from tests.support.specs import write_task


class LookupRay(FakeRay):
    """The fake Ray with RayJobsAdapter's look-up of single jobs."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.looked_up: list[list[str]] = []

    def look_up_jobs(self, submission_ids: Iterable[str]) -> Mapping[str, RayJob | None]:
        with self._lock:
            self._enter("look_up_jobs")
            ids = list(submission_ids)
            self.looked_up.append(ids)
            return {sid: self.jobs.get(sid) for sid in ids}

    def listing(self) -> dict[str, RayJob]:
        """What list_jobs would answer now, without counting a call."""
        with self._lock:
            return dict(self.jobs)


def job(sid: str, status: str = RUNNING, **extra: object) -> RayJob:
    return RayJob(sid, status, **extra)  # type: ignore[arg-type]


def seeded(ray: FakeRay, live: int, ended: int) -> None:
    for i in range(live):
        ray.jobs[f"live{i}"] = job(f"live{i}")
    for i in range(ended):
        ray.jobs[f"old{i:03d}"] = job(f"old{i:03d}", SUCCEEDED)


def test_between_listings_only_live_jobs_are_looked_up_and_an_end_is_seen_at_once() -> None:
    ray = LookupRay()
    seeded(ray, live=2, ended=100)
    view = JobView(resync_seconds=1.0)
    first = view.read(ray, 0.0)
    assert view.listings == 1 and first == ray.listing()
    again = view.read(ray, 0.1)
    assert again is first  # nothing changed: the very mapping the last pass planned from
    assert ray.looked_up == [["live0", "live1"]]
    ray.set_status("live1", SUCCEEDED)
    ended = view.read(ray, 0.2)
    assert ended["live1"].status == SUCCEEDED and ended == ray.listing()
    assert first["live1"].status == RUNNING  # a mapping handed out is never changed
    view.read(ray, 0.3)
    assert ray.looked_up[-1] == ["live0"]  # an ended job is not looked up again
    assert ray.calls["list_jobs"] == 1


def test_what_no_look_up_sees_is_seen_at_the_next_listing() -> None:
    ray = LookupRay()
    seeded(ray, live=1, ended=100)
    view = JobView(resync_seconds=1.0)
    view.read(ray, 0.0)
    ray.jobs["foreign"] = job("foreign")  # another client's job
    del ray.jobs["old000"]  # another client's delete
    assert "foreign" not in view.read(ray, 0.5)
    resynced = view.read(ray, 1.0)
    assert view.listings == 2 and resynced == ray.listing()
    assert view.read(ray, 1.1) == ray.listing()  # and the foreign job is watched now
    assert "foreign" in ray.looked_up[-1]


def test_submitted_jobs_are_looked_up_and_deleted_ones_leave_the_view() -> None:
    ray = LookupRay()
    seeded(ray, live=1, ended=100)
    view = JobView(resync_seconds=1.0)
    view.read(ray, 0.0)
    ray.submit(SubmitRequest("new", "true", None, {}))
    view.submitted(["new", "refused"])  # a refused submit: Ray has no such job
    seen = view.read(ray, 0.1)
    assert "new" in seen and "refused" not in seen and seen == ray.listing()
    ray.delete("old001")
    view.deleted(["old001"])
    assert view.read(ray, 0.2) == ray.listing()
    assert view.listings == 1


def test_many_live_jobs_or_a_failure_bring_the_listing_back() -> None:
    ray = LookupRay()
    seeded(ray, live=10, ended=100)  # 10 live beside 110 listed: more than a 32nd
    view = JobView(resync_seconds=1.0)
    view.read(ray, 0.0)
    view.read(ray, 0.1)
    assert view.listings == 2 and not ray.looked_up
    ray.jobs = {sid: j for sid, j in ray.jobs.items() if sid in ("live0", "live1") or j.terminal}
    view.read(ray, 0.2)
    ray.available = False
    with pytest.raises(RayUnavailable):
        view.read(ray, 0.3)
    ray.available = True
    view.drop()  # as RayObserver does on any RayError
    view.read(ray, 0.4)
    assert view.listings == 4
    assert view.read(ray, 0.5) == ray.listing()


def test_a_small_clusters_live_jobs_are_looked_up_however_short_the_history() -> None:
    # 4 live beside 10 ended: far more than a 32nd of the listing, but a handful, which the
    # adapter asks about in one round trip; the listing waits for the resync.
    ray = LookupRay()
    seeded(ray, live=4, ended=10)
    view = JobView(resync_seconds=1.0)
    view.read(ray, 0.0)
    ray.set_status("live2", SUCCEEDED)
    assert view.read(ray, 0.1) == ray.listing()
    assert view.listings == 1 and ray.looked_up == [["live0", "live1", "live2", "live3"]]
    view.read(ray, 1.0)
    assert view.listings == 2


def test_a_listing_no_longer_than_two_jobs_per_live_one_is_read_in_place_of_look_ups() -> None:
    # 3 live beside 3 ended: listing 6 jobs costs the dashboard less than 3 look-ups (each a
    # GCS query and a KV read of its own), so the poll lists; one job more and it looks up.
    ray = LookupRay()
    seeded(ray, live=3, ended=3)
    view = JobView(resync_seconds=1.0)
    view.read(ray, 0.0)
    ray.set_status("live1", SUCCEEDED)
    assert view.read(ray, 0.1) == ray.listing()
    assert view.listings == 2 and not ray.looked_up
    # now 2 live beside 4 ended: 6 listed > 2 per live job, so the live ones are looked up
    ray.set_status("live0", SUCCEEDED)
    assert view.read(ray, 0.2) == ray.listing()
    assert view.listings == 2 and ray.looked_up == [["live0", "live2"]]
    # the last live job looked up; then, with nothing live, nothing is asked until the resync
    ray.set_status("live2", SUCCEEDED)
    assert view.read(ray, 0.3) == ray.listing()
    view.read(ray, 0.4)
    assert view.listings == 2 and len(ray.looked_up) == 2


def test_a_look_up_keeps_the_entrypoint_resources_listed() -> None:
    ray = LookupRay()
    seeded(ray, live=0, ended=100)
    ray.jobs["foreign"] = job("foreign", entrypoint_cpus=2.0)
    view = JobView(resync_seconds=1.0)
    view.read(ray, 0.0)
    ray.jobs["foreign"] = replace(ray.jobs["foreign"], entrypoint_cpus=0.0, message="later")
    seen = view.read(ray, 0.1)
    assert seen["foreign"].message == "later" and seen["foreign"].entrypoint_cpus == 2.0


def test_a_busy_loop_reads_what_a_full_listing_would(tmp_path: Path) -> None:
    """The loop, on a queue longer than the cluster, with jobs ending at random: at every
    pass, what it read of Ray equals a full listing at that moment (no other client here)."""
    rng = random.Random(7)
    clock = FakeClock()
    ray = LookupRay(Capacity(3, 0, 2**34), clock=clock)
    seeded(ray, live=0, ended=200)  # a history, so that look-ups are worth it
    settings = Settings(
        tasks_dir=tmp_path, queue_id="q", api=False, rescan_seconds=3600, git_revision=False
    )
    rec = Reconciler(settings, TaskStore(tmp_path, clock=clock), ray, clock=clock)
    rec.events.armed()
    for i in range(12):
        write_task(tmp_path, f"t{i:02d}", priority=i % 3)
    view = rec.ray_observer.view
    real_read = view.read
    mismatches: list[str] = []

    def read(adapter: object, now: float) -> Mapping[str, RayJob]:
        seen = real_read(adapter, now)  # type: ignore[arg-type]
        if dict(seen) != ray.listing():
            mismatches.append(f"at {now}: {sorted(seen)} != {sorted(ray.listing())}")
        return seen

    view.read = read  # type: ignore[method-assign]
    for _ in range(60):
        rec.run_pass()
        live = [sid for sid, j in ray.jobs.items() if not j.terminal]
        for sid in live:
            if rng.random() < 0.3:
                ray.set_status(sid, rng.choice([RUNNING, SUCCEEDED, FAILED]))
        clock.advance(rng.choice([0.05, 0.1, 0.3]))
    assert not mismatches
    assert view.lookups > 10 and view.listings > 1  # both kinds of read were exercised


class _Dashboard(QuietHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Dashboard.seen.append(self.path)
        if self.path == "/api/version":
            body, status = json.dumps({"ray_version": "2.60.0"}).encode(), 200
        elif self.path == "/api/jobs/rq-a%2Fb":
            detail = {"submission_id": "rq-a/b", "status": "RUNNING", "start_time": 1000}
            body, status = json.dumps(detail).encode(), 200
        else:
            body, status = b"Job does not exist", 404
        self.answer(status, body)


@pytest.fixture
def dashboard() -> Iterator[str]:
    _Dashboard.seen = []
    with serving(_Dashboard) as srv:
        yield f"http://127.0.0.1:{srv.server_address[1]}"


def test_the_adapter_looks_jobs_up_by_their_encoded_id(dashboard: str) -> None:
    pytest.importorskip("ray")
    from reconciler.shell.raycluster.adapter import RayJobsAdapter

    found = RayJobsAdapter(dashboard).look_up_jobs(["rq-a/b", "gone"])
    assert found["gone"] is None
    got = found["rq-a/b"]
    assert got is not None and got.status == RUNNING and got.start_time == 1.0
    # Sent together (one connection each), so the dashboard may take them in either order.
    assert sorted(_Dashboard.seen) == ["/api/jobs/gone", "/api/jobs/rq-a%2Fb"]


def test_the_counting_adapter_counts_look_ups_and_has_none_without_them() -> None:
    from reconciler.shell.loop.jobview import JobLookup
    from reconciler.shell.ops.metrics import CountingRayAdapter, QueueMetrics

    metrics = QueueMetrics("test")
    assert not isinstance(CountingRayAdapter(FakeRay(), metrics), JobLookup)
    ray = LookupRay()
    seeded(ray, live=1, ended=100)
    counted = CountingRayAdapter(ray, metrics)
    assert isinstance(counted, JobLookup)
    view = JobView(resync_seconds=1.0)
    view.read(counted, 0.0)
    view.read(counted, 0.1)
    value = metrics.registry.get_sample_value(
        "rayqueue_ray_calls_total", {"call": "look_up_jobs", "result": "ok"}
    )
    assert value == 1.0
