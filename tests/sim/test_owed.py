"""The fluid model of what the fair-share order owes a late team (reconciler.sim.owed)."""

from __future__ import annotations

import pytest

from reconciler.sim.engine import JobRecord
from reconciler.sim.owed import Fluid, expected_late, means_at, water_fill
from reconciler.sim.workload import Job

WEEK = 7 * 86400.0
WEIGHTS = (1.0, 1.0, 1.0, 3.0)


def record(name: str, arrival: float, start: float | None, end: float | None, cpu: float):
    return JobRecord(Job(name, arrival, 1.0, cpu, 0, 0), start=start, end=end)


@pytest.mark.parametrize("a", [1.0, 0.25, 0.05])
def test_water_filling_levels_every_team_that_holds_anything(a: float) -> None:
    means = [0.0, 0.3, 0.1, 0.4]
    x = water_fill(means, WEIGHTS, a)
    assert sum(x) == pytest.approx(1.0)
    assert all(v >= 0 for v in x)
    levels = [(m + a * v) / w for m, v, w in zip(means, x, WEIGHTS, strict=True)]
    level = max(lv for lv, v in zip(levels, x, strict=True) if v > 0)
    for lv, v in zip(levels, x, strict=True):
        # those that hold share one level; those that hold nothing are above it already
        assert lv == pytest.approx(level) if v > 0 else lv >= level - 1e-12


def test_water_filling_without_a_current_term_gives_all_to_the_lowest() -> None:
    assert water_fill([0.2, 0.1, 0.3, 0.6], WEIGHTS, 0.0) == [0.0, 1.0, 0.0, 0.0]
    assert water_fill([0.1, 0.1, 0.3, 0.6], WEIGHTS, 0.0) == [0.5, 0.5, 0.0, 0.0]


def test_at_full_weight_the_model_matches_the_closed_form() -> None:
    # a = 1, the others shared by weight for a week: x_i = w_i/W - (m_i(a) - w_i/W) f(t),
    # f = ((2^(a/h) - 1) / (2^(t/h) - 1))^2 (the model at a = 1, solved by hand)
    start = [0.0, 0.2, 0.2, 0.6]
    fluid = Fluid(WEIGHTS, start, WEEK, WEEK, 1.0)
    assert fluid.held() == pytest.approx([1 / 3, 1 / 3 - 1 / 5, 1 / 3 - 1 / 5, 1 - 3 / 5])
    fluid.advance(3 * WEEK)
    f = ((2 - 1) / (2**3 - 1)) ** 2
    due = [w / 6 for w in WEIGHTS]
    want = [d - (m - d) * f for d, m in zip(due, start, strict=True)]
    assert fluid.held() == pytest.approx(want, abs=2e-4)


def test_a_newcomer_is_owed_all_at_first_then_its_weight() -> None:
    fluid = Fluid(WEIGHTS, [0.0, 0.2, 0.2, 0.6], WEEK, WEEK, 0.05)
    assert fluid.held()[0] == pytest.approx(1.0)
    fluid.advance(WEEK + 86400)
    assert 0.2 < fluid.held()[0] < 0.6
    fluid.advance(30 * WEEK)
    assert fluid.held() == pytest.approx([w / 6 for w in WEIGHTS], abs=0.01)


def test_a_team_that_overused_is_owed_little_until_its_mean_comes_down() -> None:
    # teams 1 and 2 held 0.3 each for a week (the cluster was not full), team 3 only 0.3
    fluid = Fluid(WEIGHTS, [0.0, 0.3, 0.3, 0.3], WEEK, WEEK, 0.05)
    fluid.advance(WEEK + 2 * 86400)
    x = fluid.held()
    assert x[1] == x[2] == 0.0
    assert x[0] + x[3] == pytest.approx(1.0)


def test_the_mean_at_arrival_is_the_bias_corrected_decayed_mean() -> None:
    # held 64 of 256 CPUs for the first week, then nothing for a day
    intervals = [(0.0, WEEK, {"a": 64.0, "b": 0.0}), (WEEK, 86400.0, {"a": 0.0, "b": 0.0})]
    assert means_at(iter(intervals), ["a", "b"], WEEK, WEEK, 256) == pytest.approx([0.25, 0.0])
    later = means_at(iter(intervals), ["a", "b"], WEEK + 86400, WEEK, 256)
    # a day of nothing: the decayed usage keeps 2^(-1/7) of itself; the correction grows
    kept = 2 ** (-1 / 7) * (1 - 0.5) / (1 - 2 ** (-8 / 7))
    assert later == pytest.approx([0.25 * kept, 0.0])


def test_what_the_run_owes_follows_the_means_it_had() -> None:
    # two teams of 1 CPU each on 2 CPUs; team-1 ran alone for a week, team-0 then arrives;
    # from then both always have work waiting and hold a CPU each
    records = [record("team-1/a", 0, 0, WEEK, 2), record("team-1/w", WEEK, WEEK + 1, 2 * WEEK, 1)]
    records += [
        record("team-0/w", WEEK, WEEK, 2 * WEEK, 1),
        record("team-0/x", WEEK, 2 * WEEK, 2 * WEEK + 1, 1),
    ]
    records += [record("team-1/x", WEEK, 2 * WEEK, 2 * WEEK + 1, 1)]
    late = expected_late(records, 2, (1.0, 1.0), WEEK, WEEK, 2.0, 0.05)
    assert late["means_at_arrival"] == pytest.approx({"team-0": 0.0, "team-1": 1.0})
    owed = late["expected_shares"]
    assert isinstance(owed, dict)
    # the newcomer is owed more than half, as long as team-1's week of use is remembered
    assert owed["team-0"] > 0.6
    assert sum(owed.values()) == pytest.approx(1.0)
    # without decay each is owed its weight's share
    flat = expected_late(records, 2, (1.0, 1.0), WEEK, None, 2.0, 0.05)
    assert flat["expected_shares"] == {"team-0": 0.5, "team-1": 0.5}
    assert flat["means_at_arrival"] is None
