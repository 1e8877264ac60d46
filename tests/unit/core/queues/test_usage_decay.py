"""Fair share over time: decayed usage, the share it gives, and where it is kept."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.admission.policies import POLICIES, Candidate
from reconciler.core.queues import dispatch, usage
from reconciler.core.queues.fairshare import NO_LIMIT, QueueDemand, QueueQuota, admit
from reconciler.core.queues.quotas import CURRENT_USE_WEIGHT as A
from reconciler.core.queues.quotas import dominant_share
from reconciler.shell.loop.queuefile import QueueFile, UsageBook, read_status
from specs.cluster import Capacity
from specs.queues.parse import parse_queue_config
from specs.yamlio.parse import SpecParseError

HOUR = 3600.0
WEEK = 168 * HOUR


def cpu(n: float) -> Capacity:
    return Capacity(n, 0, 0)


# --- the arithmetic --------------------------------------------------------------------------


def test_usage_halves_after_one_half_life_with_nothing_running() -> None:
    assert usage.advance(cpu(1000), Capacity(), WEEK, WEEK).cpu == pytest.approx(500)


def test_steady_use_tends_to_rate_times_tau_so_the_mean_rate_is_the_rate() -> None:
    past = usage.advance(Capacity(), cpu(8), 50 * WEEK, WEEK)
    assert past.cpu == pytest.approx(8 * WEEK / math.log(2))
    assert usage.mean_rate(past, WEEK).cpu == pytest.approx(8)


def test_advancing_in_steps_equals_advancing_at_once() -> None:
    once = usage.advance(cpu(100), cpu(4), 10 * HOUR, WEEK)
    stepped = cpu(100)
    for _ in range(10):
        stepped = usage.advance(stepped, cpu(4), HOUR, WEEK)
    assert stepped.cpu == pytest.approx(once.cpu)
    # short intervals: about rate x seconds, as the CPU-seconds definition says
    assert usage.advance(Capacity(), cpu(4), 10.0, WEEK).cpu == pytest.approx(40, rel=1e-4)


def test_a_clock_set_back_changes_nothing() -> None:
    assert usage.advance(cpu(7), cpu(4), -5.0, WEEK) == cpu(7)


def test_queues_no_longer_configured_are_forgotten() -> None:
    out = usage.advance_all({"a": cpu(1), "gone": cpu(9)}, {}, 0.0, WEEK, ["a", "b"])
    assert out == {"a": cpu(1), "b": Capacity()}


# --- the share -------------------------------------------------------------------------------

LEND = cpu(16)


@pytest.mark.parametrize(
    ("now", "nominal", "past", "weight", "expected"),
    [
        (cpu(4), cpu(0), None, 1.0, 4 / 16),  # no past: today's share
        # the past mean use, plus today's use at CURRENT_USE_WEIGHT (A)
        (cpu(4), cpu(0), cpu(4), 1.0, (4 + A * 4) / 16),
        (cpu(4), cpu(0), cpu(4), 2.0, (4 + A * 4) / 32),  # divided by the weight
        (cpu(6), cpu(8), cpu(8), 1.0, 0.0),  # within nominal, now and in the past: 0
        (cpu(10), cpu(8), cpu(12), 1.0, (A * 2 + 4) / 16),  # only what is above nominal
        (cpu(0), cpu(0), cpu(3), 1.0, 3 / 16),  # an idle queue that ran lately is not at 0
    ],
)
def test_share_with_past_use(
    now: Capacity, nominal: Capacity, past: Capacity | None, weight: float, expected: float
) -> None:
    assert dominant_share(now, nominal, LEND, weight, past).weighted == pytest.approx(expected)


_NONE = Capacity()


def _queue(
    name: str, past: Capacity | None, n: int = 4, weight: float = 1.0, held: Capacity = _NONE
) -> QueueDemand:
    quota = QueueQuota(name, Capacity(), NO_LIMIT, NO_LIMIT, weight)
    tasks = [Candidate(f"{name}/{i}", cpu(1), 0) for i in range(n)]
    return QueueDemand(quota, held, tasks, POLICIES["besteffort"], (), past)


def _lender(cpus: float = 16) -> QueueDemand:
    quota = QueueQuota("default", cpu(cpus))
    return QueueDemand(quota, Capacity(), [], POLICIES["besteffort"])


def test_the_queue_that_ran_lately_waits_for_the_one_that_did_not() -> None:
    # Today both hold nothing; a ran 4 CPUs on average lately: b starts first, and gets all
    # 6 starts, since b's 6 CPUs today count 6 x A = 0.3 against a's mean of 4
    queues = [_queue("a", cpu(4), n=8), _queue("b", cpu(0), n=8), _lender()]
    result = admit(cpu(16), cpu(6), queues, [], 0.0, 6, "none")
    assert result.start == [f"b/{i}" for i in range(6)]
    # once b holds enough that a twentieth of it outweighs a's lead, a goes first
    queues = [_queue("a", cpu(4), n=8), _queue("b", cpu(0), held=cpu(81), n=8), _lender(128)]
    assert admit(cpu(128), cpu(6), queues, [], 0.0, 1, "none").start == ["a/0"]


def test_current_usage_mode_ignores_the_past() -> None:
    text = HEAD + "  queues:\n  - name: a\n  - name: b\n"
    for mode, first in (("CurrentUsage", "a/0"), ("DecayedUsage", "b/0")):
        config = parse_queue_config(text + f"  fairSharing:\n    mode: {mode}\n")
        queue = [Candidate("a/0", cpu(1), 0), Candidate("b/0", cpu(1), 0)]
        past = {"a": cpu(3600.0 * 1000)}
        got = dispatch.admit_by_queue(
            config, cpu(16), cpu(16), queue, {}, [], 0.0, 1, POLICIES["besteffort"], past=past
        )
        assert got.start == [first], mode


def test_a_wide_head_of_the_least_served_queue_goes_before_a_narrow_pick() -> None:
    """Counting the pick, a queue using nothing whose head is wide (8 of 8 free CPUs: share
    0.5) would lose to a queue already using 2 whose pick is 1 CPU (share 3/16), every time,
    and the wide team would starve (as on the Lublin trace). The least-served queue goes
    first."""

    def demand(name: str, held: float, size: float) -> QueueDemand:
        quota = QueueQuota(name, Capacity(), NO_LIMIT, NO_LIMIT, 1.0)
        return QueueDemand(
            quota,
            cpu(held),
            [Candidate(f"{name}/0", cpu(size), 0)],
            POLICIES["backfill"],
            (),
            cpu(0),
        )

    lender = QueueDemand(QueueQuota("default", cpu(16)), Capacity(), [], POLICIES["strict"])
    queues = [demand("narrow", 2, 1), demand("wide", 0, 8), lender]
    result = admit(cpu(16), cpu(8), queues, [], 0.0, 1, "backfill")
    assert result.start == ["wide/0"]


# The property: over random arrivals, the next start goes to the queue with the lowest
# weighted decayed share (before its pick: the least-served queue) among the queues that can
# start one; among equal shares, to the queue whose head comes first in the cluster's order,
# then to the lowest share counting the pick. The past term is the bias-corrected decayed mean
# U / (tau * (1 - 2^(-t/h))) after t seconds of tracking.


def _formula_mean(decayed: float, tracked: float) -> float:
    return decayed / (WEEK / math.log(2) * (1 - 2 ** (-tracked / WEEK)))


@st.composite
def arrivals(draw: st.DrawFn) -> tuple[list[QueueDemand], Capacity, dict[str, int]]:
    n = draw(st.integers(2, 5))
    queues = []
    names: list[str] = []
    tracked = draw(st.sampled_from([HOUR, 32 * HOUR, WEEK, 10 * WEEK]))
    for k in range(n):
        name = f"q{k}"
        sizes = draw(st.lists(st.integers(1, 8), min_size=0, max_size=4))
        tasks = [Candidate(f"{name}/{i}", cpu(s), 0) for i, s in enumerate(sizes)]
        names += [t.name for t in tasks]
        held = cpu(draw(st.integers(0, 8)))  # all held + free <= 64: the lender covers it
        # decayed usage (CPU-seconds): none, or up to 64 CPUs on average
        mean = draw(st.sampled_from([0.0, 2.0, 4.0]) | st.floats(0, 64, allow_nan=False))
        decayed = mean * WEEK / math.log(2) * (1 - 2 ** (-tracked / WEEK))
        past = usage.mean_rate(cpu(decayed), WEEK, tracked)
        assert past.cpu == pytest.approx(_formula_mean(decayed, tracked), abs=1e-9)
        weight = draw(st.sampled_from([0.5, 1.0, 2.0, 3.0]))
        quota = QueueQuota(name, Capacity(), NO_LIMIT, NO_LIMIT, weight)
        queues.append(QueueDemand(quota, held, tasks, POLICIES["besteffort"], (), past))
    queues.append(QueueDemand(QueueQuota("default", cpu(64)), Capacity(), [], POLICIES["strict"]))
    free = cpu(draw(st.integers(0, 16)))
    places = draw(st.permutations(names))
    return queues, free, {name: place for place, name in enumerate(places)}


@settings(max_examples=300, deadline=None)
@given(arrivals())
def test_the_next_start_goes_to_the_lowest_weighted_decayed_share(
    case: tuple[list[QueueDemand], Capacity, dict[str, int]],
) -> None:
    queues, free, order = case
    result = admit(cpu(64), free, queues, [], 0.0, 1, "none", order=order)
    lend = cpu(64)
    could: dict[str, tuple[float, int, float]] = {}
    for q in queues:
        pick = next((c for c in q.candidates if c.request.fits_in(free)), None)
        if pick is None:
            continue
        before = dominant_share(q.usage, q.quota.nominal, lend, q.quota.weight, q.past)
        usage_with_pick = q.usage + pick.request
        after = dominant_share(usage_with_pick, q.quota.nominal, lend, q.quota.weight, q.past)
        could[q.quota.name] = (before.weighted, order[q.candidates[0].name], after.weighted)
    if not could:
        assert result.start == []
        return
    assert len(result.start) == 1
    chosen = result.start[0].split("/")[0]
    least = min(before for before, _, _ in could.values())
    assert could[chosen][0] == pytest.approx(least)
    tied = [(place, after) for before, place, after in could.values() if before == least]
    first = min(place for place, _ in tied)
    assert could[chosen][1] == first
    assert could[chosen][2] == pytest.approx(min(after for place, after in tied if place == first))


def test_the_mean_is_corrected_for_how_long_usage_has_been_tracked() -> None:
    # 8 CPUs held for a day: U / tau says 0.8 CPUs (a week's half-life remembers 10 % of a
    # day), the bias-corrected mean says 8; long tracked, both tend to the same.
    day = usage.advance(Capacity(), cpu(8), 24 * HOUR, WEEK)
    assert usage.mean_rate(day, WEEK).cpu == pytest.approx(8 * (1 - 2 ** (-24 / 168)))
    assert usage.mean_rate(day, WEEK, 24 * HOUR).cpu == pytest.approx(8)
    years = usage.advance(Capacity(), cpu(8), 100 * WEEK, WEEK)
    assert usage.mean_rate(years, WEEK, 100 * WEEK).cpu == pytest.approx(8)
    assert usage.mean_rate(cpu(5), WEEK, 0.0) == Capacity()  # nothing tracked yet


def test_the_planner_counts_the_bias_corrected_mean_when_it_knows_since_when() -> None:
    # a ran 4 CPUs for the day since tracking began, b 2 CPUs, and b holds 8 now: uncorrected,
    # the means are 0.38 and 0.19 CPUs and b's 8 today (x A = 0.4) put it above a; corrected
    # (4 vs 2 + 0.4) b goes first, and stays below a.
    text = HEAD + "  queues:\n  - name: a\n  - name: b\n"
    config = parse_queue_config(text)
    day = 24 * HOUR
    past = {"a": usage.advance(Capacity(), cpu(4), day, WEEK)}
    past["b"] = usage.advance(Capacity(), cpu(2), day, WEEK)
    queue = [Candidate("a/0", cpu(1), 0), Candidate("b/0", cpu(1), 0)]
    queue += [Candidate(f"b/{i}", cpu(1), 0) for i in range(1, 4)]
    got = {}
    for since in (None, 1000.0):
        tracked = usage.Tracked(past, since)
        got[since] = dispatch.admit_by_queue(
            config,
            cpu(16),
            cpu(8),
            queue,
            {"b/running": cpu(8)},
            [],
            1000.0 + day,
            3,
            POLICIES["besteffort"],
            past=tracked,
        ).start
    assert got[1000.0] == ["b/0", "b/1", "b/2"]
    assert got[None] == ["a/0", "b/0", "b/1"]


def test_among_equal_shares_the_longest_waiting_head_goes_first() -> None:
    """No decay: every queue with nothing running has share 0; a tie given to the narrowest
    pick (the share counting it), then the name, would make a queue whose head is wide lose
    every tie. The head first in the cluster's order (priority, queuedAt) goes first."""
    lender = QueueDemand(QueueQuota("default", cpu(16)), Capacity(), [], POLICIES["strict"])

    def demand(name: str, size: float) -> QueueDemand:
        quota = QueueQuota(name, Capacity(), NO_LIMIT, NO_LIMIT, 1.0)
        task = Candidate(f"{name}/0", cpu(size), 0)
        return QueueDemand(quota, Capacity(), [task], POLICIES["backfill"])

    queues = [demand("a", 1), demand("b", 8), lender]
    order = {"b/0": 0, "a/0": 1}  # b's head has waited longer
    assert admit(cpu(16), cpu(8), queues, [], 0.0, 1, "backfill", order=order).start == ["b/0"]
    assert admit(cpu(16), cpu(8), queues, [], 0.0, 1, "backfill").start == ["a/0"]
    # neither fits: the hold goes to b (first in order), so a may not borrow its room
    held = admit(
        cpu(16),
        cpu(7),
        [demand("a", 9), demand("b", 8), lender],
        [],
        0.0,
        1,
        "strict",
        order={"b/0": 0, "a/0": 1},
    )
    assert held.start == [] and held.queues["b"].front == "b/0"


# --- configuration ---------------------------------------------------------------------------

HEAD = "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n"


def test_fair_sharing_defaults_on_with_a_week() -> None:
    sharing = parse_queue_config(HEAD + "  queues: []\n").spec.fair_sharing
    assert sharing.mode == "DecayedUsage" and sharing.usage_half_life == WEEK


@pytest.mark.parametrize(
    ("value", "seconds"), [("168h", WEEK), ("7d", WEEK), ("1h30m", 5400.0), ("90", 90.0)]
)
def test_half_life_durations(value: str, seconds: float) -> None:
    text = HEAD + f"  fairSharing:\n    usageHalfLife: {value}\n"
    assert parse_queue_config(text).spec.fair_sharing.usage_half_life == seconds


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("  fairSharing:\n    usageHalfLife: 0h\n", "5:20: spec.fairSharing.usageHalfLife"),
        ("  fairSharing:\n    usageHalfLife: -3\n", "5:20: spec.fairSharing.usageHalfLife"),
        ("  fairSharing:\n    usageHalfLife: soon\n", "5:20: spec.fairSharing.usageHalfLife"),
        ("  fairSharing:\n    mode: Off\n", "5:11: spec.fairSharing.mode"),
        ("  queues:\n  - name: a\n    weight: 0\n", "6:13: spec.queues[0].weight"),
        ("  queues:\n  - name: a\n    weight: -1\n", "6:13: spec.queues[0].weight"),
    ],
)
def test_bad_fair_sharing_names_file_line_and_field(body: str, where: str) -> None:
    with pytest.raises(SpecParseError) as caught:
        parse_queue_config(HEAD + body)
    assert f"_queues.yaml:{where}:" in str(caught.value)


# --- kept across restarts --------------------------------------------------------------------

CONFIG = HEAD + "  queues:\n  - name: a\n  - name: b\n"


def _status(book: UsageBook, held: dict[str, Capacity]) -> dict[str, object]:
    config = parse_queue_config(CONFIG)
    states = {
        name: dispatch.fairshare.QueueState(
            name, Capacity(), held.get(name, Capacity()), Capacity(), Capacity(), 0.0, ()
        )
        for name in config.queue_names()
    }
    return dispatch.status_document(
        dispatch.ConfigState("_queues.yaml", True),
        states,
        {},
        {},
        None,
        book.past,
        book.at,
        config.spec.fair_sharing,
    )


def test_a_restart_forgets_nothing(tmp_path: Path) -> None:
    config = parse_queue_config(CONFIG)
    book = UsageBook()
    book.advance(1000.0, config)
    book.observe({"a": cpu(8)})
    book.advance(1000.0 + HOUR, config)  # a held 8 CPUs for an hour
    book.observe({"a": cpu(8)})
    files = QueueFile(tmp_path / "_queues.yaml")
    assert files.write_status(_status(book, {"a": cpu(8)}))
    # serve stops here; a runs on in Ray for another hour; serve starts again
    again = UsageBook(read_status(files.status_path))
    past = again.advance(1000.0 + 2 * HOUR, config)
    assert past is not None
    uninterrupted = usage.advance(Capacity(), cpu(8), 2 * HOUR, WEEK)
    assert past["a"].cpu == pytest.approx(uninterrupted.cpu, rel=1e-6)
    assert past["b"] == Capacity()
    # when tracking began is kept too, so the planner's mean is still corrected for 2 hours
    status = read_status(files.status_path)
    assert status is not None and status["status"]["usageSince"] == 1000.0
    assert usage.since_of(past) == 1000.0
    assert usage.mean_rate(past["a"], WEEK, 2 * HOUR).cpu == pytest.approx(8)


def test_tracking_begins_at_the_first_pass_and_again_after_the_queues_go() -> None:
    config = parse_queue_config(CONFIG)
    book = UsageBook()
    assert usage.since_of(book.advance(50.0, config) or {}) == 50.0
    assert usage.since_of(book.advance(80.0, config) or {}) == 50.0
    assert book.advance(90.0, None) is None
    assert usage.since_of(book.advance(99.0, config) or {}) == 99.0
    # a status file from before usageSince was written: unknown, the mean is U / tau
    old = {"status": {"usageAt": 10.0, "queues": [{"name": "a", "decayedUsage": {"cpu": 5}}]}}
    assert usage.since_of(UsageBook(old).advance(20.0, config) or {}) is None


def test_a_damaged_status_file_reads_as_nothing_remembered() -> None:
    for document in (None, {"status": "x"}, {"status": {"queues": [{"name": "a", "usage": 5}]}}):
        book = UsageBook(document)
        assert book.past == {} and book.at is None
    bad = {"status": {"queues": [{"name": "a", "decayedUsage": {"cpu": -5}}], "usageAt": "x"}}
    assert UsageBook(bad).past == {}


# --- limits per queue (maxRunning, maxQueued) ------------------------------------------------


def test_max_running_stops_a_queue_without_holding_anything_for_it() -> None:
    limited = QueueDemand(
        QueueQuota("a", Capacity(), NO_LIMIT, NO_LIMIT, 1.0, max_running=3),
        cpu(2),
        [Candidate(f"a/{i}", cpu(1), 0) for i in range(5)],
        POLICIES["strict"],
        running=2,
    )
    other = _queue("b", None, n=3)
    result = admit(cpu(16), cpu(14), [limited, other, _lender()], [], 0.0, 10, "strict")
    assert [s for s in result.start if s.startswith("a/")] == ["a/0"]  # 2 running + 1 = 3
    assert sum(s.startswith("b/") for s in result.start) == 3
    waiting = result.waiting["a/2"]
    assert waiting.reason.value == "MaxRunning" and waiting.ahead == 1


def test_max_queued_counts_the_first_to_arrive_whatever_their_priority() -> None:
    config = parse_queue_config(HEAD + "  queues:\n  - name: a\n    maxQueued: 2\n  - name: b\n")
    arrivals = [(5.0, "a/new-urgent"), (1.0, "a/old"), (2.0, "a/older2"), (3.0, "b/x")]
    full = dispatch.queue_full(config, arrivals)
    assert set(full) == {"a/new-urgent"}
    assert full["a/new-urgent"].reason.value == "QueueFull"


def test_limits_are_checked() -> None:
    for body, where in (
        ("  queues:\n  - name: a\n    maxRunning: 0\n", "6:17: spec.queues[0].maxRunning"),
        ("  queues:\n  - name: a\n    maxQueued: -1\n", "6:16: spec.queues[0].maxQueued"),
    ):
        with pytest.raises(SpecParseError) as caught:
            parse_queue_config(HEAD + body)
        assert f"_queues.yaml:{where}:" in str(caught.value)


@settings(max_examples=200, deadline=None)
@given(arrivals())
def test_between_sub_queues_the_next_start_goes_to_the_lowest_weighted_decayed_share(
    case: tuple[list[QueueDemand], Capacity, dict[str, int]],
) -> None:
    # The same arrivals as sub-queues of one queue `p` (nested queues), which holds
    # no quota of its own: the same formula orders the siblings.
    flat, free, flat_order = case
    order = {f"p/{name}": place for name, place in flat_order.items()}
    subs = [
        QueueDemand(
            replace(q.quota, name=f"p/{q.quota.name}", parent="p"),
            q.usage,
            [replace(c, name=f"p/{c.name}") for c in q.candidates],
            q.policy,
            (),
            q.past,
        )
        for q in flat
        if q.quota.name != "default"
    ]
    past = Capacity()
    for q in subs:
        past = past + (q.past or Capacity())
    parent = QueueDemand(
        QueueQuota("p", Capacity()), Capacity(), [], POLICIES["besteffort"], (), past
    )
    lender = QueueDemand(QueueQuota("default", cpu(64)), Capacity(), [], POLICIES["strict"])
    result = admit(cpu(64), free, [parent, *subs, lender], [], 0.0, 1, "none", order=order)
    # The order between top queues: the lowest share before the pick, ties by the head's place
    # in the cluster's order, then by the share with the pick.
    could: dict[str, tuple[float, int, float]] = {}
    for q in subs:
        pick = next((c for c in q.candidates if c.request.fits_in(free)), None)
        if pick is not None:
            before = dominant_share(q.usage, q.quota.nominal, cpu(64), q.quota.weight, q.past)
            after = dominant_share(
                q.usage + pick.request, q.quota.nominal, cpu(64), q.quota.weight, q.past
            )
            could[q.quota.name] = (before.weighted, order[q.candidates[0].name], after.weighted)
    if not could:
        assert result.start == []
        return
    assert len(result.start) == 1
    chosen = result.start[0].rsplit("/", 1)[0]
    least = min(before for before, _, _ in could.values())
    assert could[chosen][0] == pytest.approx(least)
    tied = [(place, after) for before, place, after in could.values() if before == least]
    first = min(place for place, _ in tied)
    assert could[chosen][1] == first
    assert could[chosen][2] == pytest.approx(min(after for place, after in tied if place == first))
