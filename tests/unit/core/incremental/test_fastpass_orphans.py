"""A sidecar without a spec (an orphan) is a spec deleted or a sidecar read anew: when the
caller names what it read anew (`plan_incremental(changed=...)`), the fast pass looks for
orphans among those names and the last pass's orphans only, not among every sidecar
(reconciler/core/incremental/keptorder.py `orphans_of`); told nothing, it compares every name. Every
pass equals plan() in every field (History's check);
tests/unit/shell/loop/test_changed_versions.py checks that the loop names every sidecar it reads
anew."""

from __future__ import annotations

from typing import Any

import pytest

import tests.support.incremental_history as history
from tests.support.busy_queue import busy_queue, end_one, start_all
from tests.support.incremental_history import History


class _Spy(dict[str, Any]):
    """The statuses, counting the calls to keys() (a view over every name)."""

    calls = 0

    def keys(self) -> Any:
        _Spy.calls += 1
        return super().keys()


def _busy(tell: bool) -> History:
    world = busy_queue("backfill", 0, tasks=60, exact=5, inflight=3, tell_changed=tell)
    world.run_pass()
    world.run_pass()
    return world


@pytest.mark.parametrize("tell", [True, False])
def test_a_pass_told_what_changed_does_not_look_at_every_sidecar(
    tell: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs end and start: in each fast pass told what changed, no view over every sidecar's
    name is taken; told nothing, the names are compared."""
    world = _busy(tell)
    real = history.plan_incremental
    seen: list[int] = []

    def spied(memo: Any, specs: Any, statuses: Any, *args: Any, **kwargs: Any) -> Any:
        _Spy.calls = 0
        done = real(memo, specs, _Spy(statuses), *args, **kwargs)
        if done[1].fast:
            seen.append(_Spy.calls)
        return done

    monkeypatch.setattr(history, "plan_incremental", spied)
    for _ in range(3):
        end_one(world)
    assert len(seen) >= 6  # most of them fast
    assert (max(seen) == 0) if tell else (min(seen) >= 1)


@pytest.mark.parametrize("tell", [True, False])
def test_an_orphan_is_found_the_pass_after_its_spec_went(tell: bool) -> None:
    """A deleted spec whose job runs: the pass that sees the deletion asks for the stop and
    keeps the sidecar (the run's id); the next, with the job stopped, removes it. That pass
    is told nothing of the name (its spec's deletion was last pass's news): the orphan is
    found among the last pass's."""
    world = _busy(tell)
    start_all(world)
    world.run_pass()
    running = [n for n, s in world.statuses.items() if s.status.submission_id in world.jobs]
    name = running[0]
    world.apply(("delete", name))
    plan = world.run_pass()
    assert [s.task for s in plan.stops] == [name] and name not in plan.delete_statuses
    assert world.memo.fast and world.memo.order is not None
    assert name in world.memo.order.orphans and name not in world.memo.order.statuses
    world.apply(("tick", 1))
    plan = world.run_pass()  # History stopped the job as Ray would
    assert world.memo.fast and plan.delete_statuses == [name]
