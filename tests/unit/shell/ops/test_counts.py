"""Counts kept between passes (reconciler/shell/ops/counts.py) equal a full count of every status,
whatever changes, as long as each pass names its changed statuses as the planner does."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.shell.ops.counts import Tally
from reconciler.shell.ops.metrics import QueueMetrics
from specs.cluster import Capacity
from specs.task.models import Metadata, Phase
from specs.task.status import TaskStatus, TaskStatusBody

NAMES = [f"t{i}" for i in range(6)]
PHASES = [Phase.QUEUED, Phase.RUNNING, Phase.STARTING, Phase.SUCCEEDED, Phase.UNSCHEDULABLE]


def status(phase: Phase, queue: str | None = None, reason: str | None = None) -> TaskStatus:
    body = TaskStatusBody(phase=phase, queue=queue, reason=reason)
    return TaskStatus(metadata=Metadata(), status=body)


def key_of(s: TaskStatus) -> tuple[str | None, Phase] | None:
    return None if s.status.phase is Phase.SUCCEEDED else (s.status.queue, s.status.phase)


# One pass: each name gets a new status (phase index, queue), keeps its own (None), or is gone.
step = st.dictionaries(
    st.sampled_from(NAMES),
    st.one_of(st.none(), st.just("gone"), st.tuples(st.integers(0, 4), st.sampled_from("ab"))),
)


def apply(
    world: dict[str, TaskStatus], changes: dict[str, object]
) -> tuple[dict[str, TaskStatus], set[str]]:
    """The next pass's statuses, and the names whose status is not the very same object
    (what the planner's write_classes names), plus the gone ones."""
    after = dict(world)
    changed: set[str] = set()
    for name, change in changes.items():
        if change == "gone":
            if after.pop(name, None) is not None:
                changed.add(name)  # a deleted task's status: delete_statuses, not write_classes
        elif isinstance(change, tuple):
            phase, queue = change
            after[name] = status(PHASES[phase], queue)
            changed.add(name)
    return after, changed


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(step, st.booleans()), min_size=1, max_size=30))
def test_kept_counts_equal_a_full_count(passes: list[tuple[dict[str, object], bool]]) -> None:
    tally: Tally[tuple[str | None, Phase]] = Tally(key_of)
    world: dict[str, TaskStatus] = {}
    for changes, name_gone in passes:
        after, changed = apply(world, changes)
        # A gone task may or may not be named: either way the counts must come out right.
        named = changed if name_gone else {n for n in changed if n in after}
        tally.update(after, named)
        full = Counter(k for s in after.values() if (k := key_of(s)) is not None)
        assert tally.counts == full
        world = after


def test_a_pass_that_names_its_changes_does_not_count_anew() -> None:
    tally: Tally[tuple[str | None, Phase]] = Tally(key_of)
    world = {n: status(Phase.QUEUED) for n in NAMES}
    tally.update(world, None)
    assert tally.recounts == 1
    world["t0"] = status(Phase.RUNNING)
    tally.update(world, {"t0"})
    assert tally.recounts == 1  # only t0 was looked at
    assert tally.counts == Counter({(None, Phase.QUEUED): 5, (None, Phase.RUNNING): 1})
    del world["t1"]  # gone, and not named: the sizes differ, so everything is counted anew
    tally.update(world, set())
    assert tally.recounts == 2
    assert tally.counts == Counter({(None, Phase.QUEUED): 4, (None, Phase.RUNNING): 1})


def _gauges(m: QueueMetrics) -> dict[tuple[str, ...], float]:
    out = {}
    for metric in (m.pending, m.running):
        for family in metric.collect():
            for sample in family.samples:
                out[(sample.name, *sorted(sample.labels.values()))] = sample.value
    return out


def test_metrics_from_changed_names_equal_metrics_from_every_status() -> None:
    incremental, full = QueueMetrics("0"), QueueMetrics("0")
    before: dict[str, TaskStatus] = {}
    after = {n: status(Phase.QUEUED, reason="WaitingForResources") for n in NAMES}
    passes = [
        (after, set(after)),
        ({**after, "t0": status(Phase.RUNNING)}, {"t0"}),
        ({**after, "t0": status(Phase.SUCCEEDED), "t1": status(Phase.STARTING)}, {"t0", "t1"}),
    ]
    for statuses, changed in passes:
        for m, names in ((incremental, changed), (full, None)):
            m.observe_pass(
                before,
                statuses,
                capacity=Capacity(4, 0, 8),
                reserved=Capacity(1, 0, 0),
                ray_available=True,
                changed=names,
            )
        assert _gauges(incremental) == _gauges(full)
        before = statuses
    assert incremental._tally.recounts == 1
    finished = incremental.finished.labels("default", "Succeeded")._value.get()
    assert finished == full.finished.labels("default", "Succeeded")._value.get() == 1


def test_a_stale_tally_counts_everything_at_its_next_update() -> None:
    tally: Tally[tuple[str | None, Phase]] = Tally(key_of)
    world = {n: status(Phase.QUEUED) for n in NAMES}
    tally.update(world, None)
    world["t0"] = status(Phase.RUNNING)  # changed in a pass that failed before counting it
    tally.stale()
    tally.update(world, set())  # the next pass names nothing: t0's object is unchanged now
    assert tally.recounts == 2
    assert tally.counts[(None, Phase.RUNNING)] == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(step, st.booleans()), min_size=1, max_size=30))
def test_equal_keys_are_kept_as_one_object(passes: list[tuple[dict[str, object], bool]]) -> None:
    """Sharing rule (to keep memory small): every task with an equal key holds the one object,
    and the kept keys equal each status's own key."""
    tally: Tally[tuple[str | None, Phase]] = Tally(key_of)
    world: dict[str, TaskStatus] = {}
    for changes, name_gone in passes:
        after, changed = apply(world, changes)
        tally.update(after, changed if name_gone else {n for n in changed if n in after})
        kept = tally._keys
        assert kept == {n: key_of(s) for n, s in after.items()}
        by_value: dict[object, int] = {}
        for key in kept.values():
            if key is not None:
                assert by_value.setdefault(key, id(key)) == id(key)
        assert tally._shared.keys() == tally.counts.keys()
        world = after
