"""The census joined to Ray's job listing (shell/loop/holdings.py): what the planner is told
each job holds, by submission id, and what Ray reported available."""

from __future__ import annotations

import logging

import pytest

from reconciler.shell.loop.holdings import NOTHING, CensusJoin, InRay, in_ray
from specs.cluster import Available, Capacity, Census, Holdings, RayJob

T = 1000.0  # when the census was taken
MAX_AGE = 30.0


def job(
    sid: str,
    job_id: str | None,
    *,
    start: float | None = T - 10,
    status: str = "RUNNING",
    end: float | None = None,
) -> RayJob:
    return RayJob(sid, status, start_time=start, end_time=end, job_id=job_id)


def census(
    *held: Holdings,
    entrypoints: dict[str, Capacity] | None = None,
    whole: bool = True,
    available: Available | None = None,
    taken_at: float = T,
) -> Census:
    return Census(
        taken_at,
        {h.job_id: h for h in held},
        entrypoints or {},
        whole=whole,
        available=available,
    )


def listing(*jobs: RayJob) -> dict[str, RayJob]:
    return {j.submission_id: j for j in jobs}


def test_a_listed_job_holds_its_census_holdings_and_its_supervisors_reservation() -> None:
    taken = census(
        Holdings("02", actors=Capacity(3), tasks=Capacity(1)),
        entrypoints={"a": Capacity(0.5)},
        available=Available(Capacity(0), T),
    )
    found = in_ray(taken, listing(job("a", "02")), T + 1, MAX_AGE)
    assert found == InRay({"a": Capacity(4.5)}, Capacity(0))


def test_a_job_the_whole_census_does_not_name_holds_nothing() -> None:
    found = in_ray(census(), listing(job("a", "02")), T + 1, MAX_AGE)
    assert found.held == {"a": Capacity()}


def test_a_job_a_census_not_whole_does_not_name_is_not_observed() -> None:
    taken = census(Holdings("03", actors=Capacity(2), complete=False), whole=False)
    found = in_ray(taken, listing(job("a", "02"), job("b", "03")), T + 1, MAX_AGE)
    # b's figure is a lower bound, still more than nothing; a's is unknown.
    assert found.held == {"b": Capacity(2)}


def test_a_job_submitted_after_the_census_is_not_observed() -> None:
    taken = census(Holdings("02", actors=Capacity(2)))
    found = in_ray(taken, listing(job("a", "02", start=T + 0.5)), T + 1, MAX_AGE)
    assert found.held == {}


def test_a_job_submitted_after_rays_report_of_what_is_available_is_not_observed() -> None:
    """Its use is not in the report: left out, the planner takes its charge off it."""
    taken = census(Holdings("02", actors=Capacity(2)), available=Available(Capacity(1), T - 5))
    found = in_ray(taken, listing(job("a", "02", start=T - 2)), T + 1, MAX_AGE)
    assert found == InRay({}, Capacity(1))


def test_a_job_not_started_is_not_observed() -> None:
    found = in_ray(census(), listing(job("a", None), job("b", "02", start=None)), T, MAX_AGE)
    assert found.held == {}


def test_a_job_that_ended_after_the_census_keeps_what_it_held_then() -> None:
    """The planner gives it back to what Ray reported available."""
    taken = census(Holdings("02", actors=Capacity(4)))
    ended = job("a", "02", status="SUCCEEDED", end=T + 0.5)
    long_ago = job("b", "03", status="FAILED", start=T - 100, end=T - 50)
    assert in_ray(taken, listing(ended, long_ago), T + 1, MAX_AGE).held == {"a": Capacity(4)}


def test_a_driver_no_listed_job_has_is_keyed_by_its_job_id() -> None:
    taken = census(
        Holdings("05", groups=Capacity(2)),
        Holdings("01"),  # the dashboard's own job: its supervisors' reservations are apart
        entrypoints={"a": Capacity(1)},
    )
    found = in_ray(taken, listing(job("a", "02")), T + 1, MAX_AGE)
    assert found.held == {"a": Capacity(1), "05": Capacity(2)}


def test_a_listed_jobs_holdings_are_never_a_drivers_even_when_left_out() -> None:
    taken = census(Holdings("02", actors=Capacity(2)))
    found = in_ray(taken, listing(job("a", "02", start=T + 5)), T + 6, MAX_AGE)
    assert found.held == {}


@pytest.mark.parametrize("taken", [None, census(Holdings("02", actors=Capacity(2)))])
def test_a_stale_or_absent_census_gives_nothing(taken: Census | None) -> None:
    assert in_ray(taken, listing(job("a", "02")), T + MAX_AGE + 1, MAX_AGE) is NOTHING


def test_a_stale_report_of_what_is_available_is_not_read() -> None:
    taken = census(Holdings("02", actors=Capacity(2)), available=Available(Capacity(1), T - 60))
    found = in_ray(taken, listing(job("a", "02")), T + 1, MAX_AGE)
    assert found == InRay({"a": Capacity(2)}, None)


def test_the_loop_says_once_that_the_census_went_stale_and_again_when_it_is_fresh(
    caplog: pytest.LogCaptureFixture,
) -> None:
    join = CensusJoin(10)
    jobs = listing(job("a", "02"))
    taken = census(Holdings("02", actors=Capacity(2)))
    caplog.set_level(logging.INFO, "rayqueue.loop")
    assert join.read(None, jobs, T) is NOTHING  # before the first census: nothing to say
    assert join.read(taken, jobs, T + 1).held == {"a": Capacity(2)}
    assert caplog.messages == []
    assert join.read(taken, jobs, T + 31) is NOTHING
    assert join.read(taken, jobs, T + 40) is NOTHING
    stale = [m for m in caplog.messages if "admission counts what specs declare" in m]
    assert len(stale) == 1 and "31 s old" in stale[0]
    fresh = census(Holdings("02", actors=Capacity(2)), taken_at=T + 45)
    assert join.read(fresh, jobs, T + 46).held == {"a": Capacity(2)}
    assert sum("fresh again" in m for m in caplog.messages) == 1


def test_the_same_census_and_listing_give_the_last_join_again() -> None:
    join = CensusJoin(10)
    jobs = listing(job("a", "02", start=T - 20))
    taken = census(Holdings("02", actors=Capacity(2)), available=Available(Capacity(1), T - 10))
    first = join.read(taken, jobs, T + 1)
    assert first == InRay({"a": Capacity(2)}, Capacity(1))
    assert join.read(taken, jobs, T + 2) is first
    assert join.read(taken, dict(jobs), T + 2) == first
    # Ray's report grows too old before the census does: joined again, without it.
    assert join.read(taken, jobs, T + 21) == InRay({"a": Capacity(2)}, None)
    assert join.read(taken, jobs, T + 31) is NOTHING
