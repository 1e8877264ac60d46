"""The victim choice, table-driven: who may be preempted, in which order, and how many.

Through choose_in_cohort, the function the planner calls, for one queue: the preemptor fits
when what is free now plus what its victims free holds its request."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.preemption.victims import (
    LOWER_PRIORITY,
    NEVER,
    Preemptor,
    Rules,
    Running,
    choose_in_cohort,
    still_needed,
)
from specs.cluster import Capacity

NOW = 10_000.0
ON = Rules(LOWER_PRIORITY)


def cpu(n: float, gpu: float = 0) -> Capacity:
    return Capacity(n, gpu, 0)


def run(name: str, priority: int, cpus: float, age: float = 600, **kw: object) -> Running:
    return Running(name, priority, cpu(cpus), NOW - age, **kw)  # type: ignore[arg-type]


P9 = Preemptor("urgent", 9, cpu(2))


def choose_victims(
    preemptor: Preemptor, free: Capacity, running: list[Running], now: float, rules: Rules
) -> tuple[Running, ...]:
    def fits(freed: Capacity, _own: Capacity) -> bool:
        return preemptor.request.fits_in(free + freed)

    runs = [("q", r) for r in running]
    victims = choose_in_cohort(preemptor, "q", runs, {"q": rules}, {}, fits, now, reclaim=False)
    return tuple(v.run for v in victims)


@pytest.mark.parametrize(
    ("preemptor", "free", "running", "rules", "expected"),
    [
        # the cheapest victims: lowest priority first, then the youngest run
        (
            P9,
            cpu(0),
            [run("old", 0, 1, 900), run("young", 0, 1, 60), run("p1", 1, 1)],
            ON,
            ("young", "old"),
        ),
        # minimal: the greedy pick takes `small` first, but `big` alone suffices; small is spared
        (P9, cpu(0), [run("small", 0, 1), run("big", 1, 2)], ON, ("big",)),
        # only what is missing: one CPU free, one victim of one CPU is enough
        (P9, cpu(1), [run("a", 0, 1), run("b", 0, 1, 30)], ON, ("b",)),
        # nothing when even every candidate together would not make room
        (P9, cpu(0), [run("a", 0, 1), run("p9", 9, 4)], ON, ()),
        # preemptible: false is never a victim
        (P9, cpu(0), [run("keep", 0, 2, preemptible=False), run("p5", 5, 2)], ON, ("p5",)),
        # younger than minRuntimeSeconds: exempt
        (
            P9,
            cpu(0),
            [run("fresh", 0, 2, 10), run("p3", 3, 2, 200)],
            Rules(LOWER_PRIORITY, 120),
            ("p3",),
        ),
        # equal priority is never a victim (it could preempt back: no ping-pong)
        (P9, cpu(0), [run("peer", 9, 2)], ON, ()),
        # higher priority never
        (Preemptor("p3", 3, cpu(2)), cpu(0), [run("p5", 5, 2)], ON, ()),
        # a task preempted max_per_task times already is spared from then on
        (
            P9,
            cpu(0),
            [run("tired", 0, 2, preemptions=3), run("p4", 4, 2, preemptions=2)],
            Rules(LOWER_PRIORITY, 0, 3),
            ("p4",),
        ),
        # preemption off
        (P9, cpu(0), [run("a", 0, 2)], Rules(NEVER), ()),
        # it fits already: nothing to stop
        (P9, cpu(2), [run("a", 0, 2)], ON, ()),
        # ties broken by name, so the choice is the same on every pass and every replica
        (P9, cpu(1), [run("b", 0, 1), run("a", 0, 1)], ON, ("a",)),
        # a GPU task: CPU-only victims do not help and are spared, whatever their priority
        (
            Preemptor("gpu", 9, cpu(1, 1)),
            cpu(4),
            [run("c", 0, 1), Running("g", 5, cpu(1, 1), 0)],
            ON,
            ("g",),
        ),
    ],
)
def test_victims(
    preemptor: Preemptor,
    free: Capacity,
    running: list[Running],
    rules: Rules,
    expected: tuple[str, ...],
) -> None:
    assert tuple(v.name for v in choose_victims(preemptor, free, running, NOW, rules)) == expected


def test_candidate_order_is_priority_then_elapsed_then_name() -> None:
    running = [run("c", 1, 1, 5), run("b", 0, 1, 500), run("a", 0, 1, 500), run("d", 0, 1, 50)]
    order = []
    while running:  # one CPU short: the cheapest candidate alone is chosen, then the next
        (victim,) = choose_victims(Preemptor("p9", 9, cpu(1)), cpu(0), running, NOW, ON)
        order.append(victim.name)
        running.remove(victim)
    assert order == ["d", "a", "b", "c"]


def test_held_back_is_what_the_victims_do_not_free() -> None:
    assert still_needed(Capacity(4, 1, 8), Capacity(3, 2, 8)) == Capacity(1, 0, 0)


runs = st.lists(
    st.builds(
        Running,
        name=st.sampled_from("abcdefghij"),
        priority=st.integers(0, 9),
        request=st.builds(Capacity, st.integers(0, 4), st.integers(0, 1), st.just(0.0)),
        started=st.floats(NOW - 1000, NOW),
        preemptible=st.booleans(),
    ),
    max_size=8,
    unique_by=lambda r: r.name,
)


@settings(max_examples=300, deadline=None)
@given(
    priority=st.integers(0, 9),
    need=st.builds(Capacity, st.integers(1, 8), st.integers(0, 1), st.just(0.0)),
    free=st.builds(Capacity, st.integers(0, 4), st.integers(0, 1), st.just(0.0)),
    running=runs,
    min_runtime=st.sampled_from([0.0, 300.0]),
)
def test_victims_are_few_enough_and_enough(
    priority: int,
    need: Capacity,
    free: Capacity,
    running: list[Running],
    min_runtime: float,
) -> None:
    preemptor = Preemptor("p", priority, need)
    rules = Rules(LOWER_PRIORITY, min_runtime)
    victims = choose_victims(preemptor, free, running, NOW, rules)
    freed = sum((v.request for v in victims), Capacity())
    if not victims:
        # Only when it fits already, or nothing could make it fit.
        eligible = [
            r
            for r in running
            if r.preemptible and r.priority < priority and NOW - r.started >= min_runtime
        ]
        everyone = sum((r.request for r in eligible), free)
        assert need.fits_in(free) or not need.fits_in(everyone)
        return
    assert need.fits_in(free + freed)
    for victim in victims:
        assert victim.preemptible and victim.priority < priority
        assert NOW - victim.started >= min_runtime
        assert not need.fits_in(free + freed - victim.request), f"{victim.name} not needed"
