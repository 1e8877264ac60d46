"""The census thread (ops/census.py) with the fake Ray: the latest census as a value, its cost
in the metrics, a Ray that cannot say (said once), one that does not answer (said once per
outage), and the loop that never waits for it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from reconciler.app.assembly import build_reconciler, start_loop
from reconciler.shell.ops.census import CensusMetrics, CensusPoller
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import (
    META_QUEUE,
    Capacity,
    Census,
    Holdings,
    RayUnavailable,
    SubmitRequest,
    Usage,
)
from specs.settings.process import Settings
from specs.tenancy.access import Tokens
from tests.support.waiting import wait_until


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def submitted(fake: FakeRay, sid: str = "job-a") -> str:
    fake.submit(SubmitRequest(sid, "python x.py", None, {}))
    job_id = fake.job_info(sid).job_id
    assert job_id is not None
    return job_id


def test_the_latest_census_is_what_the_fake_says_each_job_holds() -> None:
    fake = FakeRay()
    job_id = submitted(fake)
    fake.hold("job-a", actors=Capacity(8), usage=Usage(cpu_percent=700, processes=8))
    fake.set_holdings(Holdings("0a000000", tasks=Capacity(2)))  # a foreign driver's job
    poller = CensusPoller(fake, 15)
    assert poller.latest is None
    taken = poller.take()
    assert taken is poller.latest is not None
    assert taken.of(job_id).logical == Capacity(8) and taken.physical
    assert taken.of("0a000000").tasks == Capacity(2)
    assert taken.entrypoints == {"job-a": Capacity()}
    fake.set_status("job-a", "SUCCEEDED")
    after = poller.take()
    assert after is not None and job_id not in after.jobs  # an ended job holds nothing
    assert taken.of(job_id).logical == Capacity(8)  # the census read before is unchanged


def test_what_a_census_costs_is_counted() -> None:
    registry = CollectorRegistry()
    fake = FakeRay()
    submitted(fake)
    fake.hold("job-a", groups=Capacity(1))
    poller = CensusPoller(fake, 15, CensusMetrics(registry))
    poller.take()
    poller.take()
    assert sample(registry, "rayqueue_census_polls_total", result="ok") == 2
    assert sample(registry, "rayqueue_census_requests_total") == 6  # the fake says 3 a census
    assert sample(registry, "rayqueue_census_last_requests") == 3
    assert sample(registry, "rayqueue_census_duration_seconds_count") == 2
    assert sample(registry, "rayqueue_census_cpu_seconds_total") >= 0
    assert sample(registry, "rayqueue_census_jobs") == 1
    assert sample(registry, "rayqueue_census_whole") == 1
    fake.census_whole = False
    poller.take()
    assert sample(registry, "rayqueue_census_whole") == 0


def test_a_ray_that_cannot_say_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    fake = FakeRay()
    fake.census_supported = False
    poller = CensusPoller(fake, 15, CensusMetrics(registry))
    with caplog.at_level(logging.INFO, logger="rayqueue.census"):
        for _ in range(5):
            assert poller.take() is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "counts what specs declare" in warnings[0].getMessage()
    assert poller.latest is None and poller.supported is False
    assert sample(registry, "rayqueue_census_polls_total", result="unsupported") == 5


def test_an_outage_is_said_once_and_the_last_census_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeRay()
    poller = CensusPoller(fake, 15)
    first = poller.take()
    with caplog.at_level(logging.INFO, logger="rayqueue.census"):
        for _ in range(3):
            fake.fail_next("take_census", RayUnavailable("down"))
            assert poller.take() is first  # kept: its taken_at says how old it is
        poller.take()
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.WARNING, logging.INFO]  # failed, works again


def test_the_loop_never_waits_for_a_census(tmp_path: Path) -> None:
    """A census that hangs holds its own thread only: the loop's passes go on."""
    release = threading.Event()

    class SlowRay(FakeRay):
        def take_census(self, drivers: Mapping[tuple[str, int], str] | None = None) -> Census:
            release.wait(30)
            return super().take_census(drivers)

    settings = Settings(tasks_dir=tmp_path, queue_id="q", api=False, census_seconds=1)
    reconciler = build_reconciler(settings, SlowRay(Capacity(4, 0, 2**34)), tokens=Tokens())
    assert reconciler.census is not None
    stop = threading.Event()
    threads = start_loop(reconciler, stop)
    try:
        (tmp_path / "a.yaml").write_text(
            "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: echo hi\n"
        )
        wait_until(
            lambda: (tmp_path / "a.status.yaml").exists(), "the loop to write a's status", 20
        )
        assert reconciler.latest_census() is None  # the census still hangs
        release.set()
        wait_until(lambda: reconciler.latest_census() is not None, "the census", 10)
    finally:
        release.set()
        stop.set()
        reconciler.wake.set()
        threads.join(10)
    assert threads.census is not None and not threads.census.is_alive()


def test_no_census_when_switched_off(tmp_path: Path) -> None:
    settings = Settings(tasks_dir=tmp_path, queue_id="q", api=False, census_seconds=0)
    reconciler = build_reconciler(settings, FakeRay(), tokens=Tokens())
    assert reconciler.census is None and reconciler.latest_census() is None
    with pytest.raises(ValueError, match="RAYQUEUE_CENSUS_SECONDS"):
        Settings(tasks_dir=tmp_path, census_seconds=0.1)


def test_the_thread_takes_one_census_a_period() -> None:
    fake = FakeRay()
    poller = CensusPoller(fake, 0.05)
    stop = threading.Event()
    thread = poller.start(stop)
    time.sleep(0.3)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert 2 <= fake.calls["take_census"] <= 8


def test_what_this_queues_jobs_hold_and_what_others_hold() -> None:
    registry = CollectorRegistry()
    fake = FakeRay()
    fake.submit(SubmitRequest("ours", "python x.py", None, {META_QUEUE: "q"}))
    fake.submit(SubmitRequest("other-queue", "python x.py", None, {META_QUEUE: "p"}))
    fake.hold("ours", actors=Capacity(8, 0, 2**30))
    fake.hold("other-queue", groups=Capacity(2))
    fake.set_holdings(Holdings("0a000000", tasks=Capacity(1)))  # a driver no one submitted
    fake.entrypoints["other-queue"] = Capacity(0.5)
    poller = CensusPoller(fake, 15, CensusMetrics(registry))
    poller.follow(lambda: {job.submission_id: job for job in fake.list_jobs()}, "q")
    poller.take()
    assert sample(registry, "rayqueue_census_held", owner="queue", resource="cpu") == 8
    assert sample(registry, "rayqueue_census_held", owner="queue", resource="memory") == 2**30
    assert sample(registry, "rayqueue_census_held", owner="foreign", resource="cpu") == 3.5
