"""A plan does not depend on the order of its inputs.

The loop hands the planner its specs in an order that is not the folder's (with git sources,
the iteration order of a set of names, which changes between processes), and the versions,
statuses and Ray's jobs in others. Every decision must equal what a full read of the folder
and of Ray gives, so `plan()` of the same inputs in any order (the specs, the statuses, the
observed jobs, the queues' usage, the queue file's entries) must give the same plan in every
field: submits, stops and time-outs in the same order, every status, positions, estimated
starts, the summary. So must the incremental planner, fed its inputs in a new order at every
pass (tests/support/incremental_history.py, `History.permute`).

The default run is sized for CI; `RAYQUEUE_PROPERTY_EXAMPLES=500` runs that many.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from reconciler.core.planner import Observation, TaskInput, plan
from reconciler.core.queues.usage import QueueUsage
from specs.cluster import (
    META_QUEUE,
    META_SPEC_HASH,
    META_TASK,
    RUNNING,
    Capacity,
    NodeType,
    RayJob,
    Scaling,
)
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from tests.support.incremental_history import History, assert_identical
from tests.support.planner_world import GIB, task
from tests.unit.core.incremental import test_histories as small
from tests.unit.core.incremental import test_sequences as long

EXAMPLES = int(os.environ.get("RAYQUEUE_PROPERTY_EXAMPLES", "100"))
# Elements of an array (the store hands the planner one task per element): equal priority
# and first sight, so their index decides their order, and [10] sorts before [2] as text.
ARRAY = (*(f"team-a/sweep[{i}]" for i in (0, 1, 2, 10, 11)), "sweep[2]", "sweep[10]")


def reversed_order(items: list[Any]) -> list[Any]:
    return items[::-1]


@st.composite
def orders(draw: st.DrawFn) -> Callable[[list[Any]], list[Any]]:
    """A way to reorder each pass's inputs: reversed, or shuffled anew at every pass from a
    seed Hypothesis draws (one number, however many items and passes)."""
    if draw(st.booleans()):
        return reversed_order
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))

    def shuffled(items: list[Any]) -> list[Any]:
        again = list(items)
        rng.shuffle(again)
        return again

    return shuffled


def reordered_queues(
    queues: QueueConfig | None, permute: Callable[[list[Any]], list[Any]]
) -> QueueConfig | None:
    """The queue file with its entries in another order (the tree the queue files build)."""
    if queues is None:
        return None
    entries = permute(list(queues.spec.queues))
    return queues.model_copy(update={"spec": queues.spec.model_copy(update={"queues": entries})})


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    options=long.options_of(),
    queue_file=st.sampled_from(long.QUEUE_FILES),
    size=st.sampled_from([20, 40, 60, 100]),
    first=st.integers(0, 2**16),
    cpus=st.sampled_from([4, 8, 16]),
    plain=st.booleans(),
    tell=st.booleans(),
    simple=st.booleans(),
    simple_file=st.sampled_from(long.FAST_QUEUE_FILES),
    permute=orders(),
    foreign=st.booleans(),
    sequence=st.lists(long.steps(), min_size=1, max_size=30),
)
# Found by this test: the status files of deleted specs were dropped in the order the statuses
# came in, not by name (reconciler.core.cleanup.orphan_sidecars).
@example(
    options=PlanOptions(queue_id="q"),
    queue_file=None,
    size=20,
    first=0,
    cpus=4,
    plain=False,
    tell=False,
    simple=False,
    simple_file=None,
    permute=reversed_order,
    foreign=False,
    sequence=[("delete", 0, 20)],
)
def test_plans_do_not_depend_on_the_order_of_their_inputs(
    options: PlanOptions,
    queue_file: str | None,
    size: int,
    first: int,
    cpus: int,
    plain: bool,
    tell: bool,
    simple: bool,
    simple_file: str | None,
    permute: Callable[[list[Any]], list[Any]],
    foreign: bool,
    sequence: list[tuple[Any, ...]],
) -> None:
    """Long sequences over many tasks (priorities with ties, equal queuedAt, team and nested
    queues, every policy, dependencies, arrays, running and ended jobs, timeouts, retries,
    preemption): at every pass, plan() of the inputs reordered equals plan() of them as
    kept, and the incremental planner fed them reordered equals both."""
    if simple:  # what the fast pass takes (test_sequences)
        queue_file, plain = simple_file, True
        options = dataclasses.replace(options, preemption="Never")
    # Jobs of others counted as used: Ray lists them in no order either.
    options = dataclasses.replace(options, count_foreign_jobs=foreign)
    world = History(
        options,
        reordered_queues(long.queues_of(queue_file), permute),
        capacity=Capacity(cpus, 0, 64 * GIB),
        check=assert_identical,
        tell_changed=tell,
        permute=permute,
    )
    note(f"queue file: {queue_file and queue_file.splitlines()[-1]}; {options}")
    note(f"size {size}, first {first}, cpus {cpus}, plain {plain}, tell {tell}, simple {simple}")
    note(f"sequence {sequence}")
    run = long.Sequence(world, long.names_of(size) + ARRAY, plain)
    run.run(("add", size // 2 + len(ARRAY), first))
    for step in sequence:
        run.run(step)
    assert world.passes > len(sequence)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    options=small.options_of(),
    with_queues=st.sampled_from([False, True, "drawn"]),
    teams=small.team_queues(),
    grows=st.sampled_from(small.SCALINGS),
    permute=orders(),
    foreign=st.booleans(),
    history=st.lists(
        st.tuples(small.steps(), st.sets(st.sampled_from(small.NAMES), max_size=2)),
        min_size=1,
        max_size=40,
    ),
)
def test_small_histories_do_not_depend_on_the_order_of_their_inputs(
    options: PlanOptions,
    with_queues: bool | str,
    teams: tuple[QueueConfig, QueueUsage | None],
    grows: Scaling | None,
    permute: Callable[[list[Any]], list[Any]],
    foreign: bool,
    history: list[tuple[tuple[Any, ...], set[str]]],
) -> None:
    """The planner's random histories over six names (explicit submission ids claimed by
    several tasks, dependencies, an autoscaler, decayed usage, failed writes, restarts), each
    pass's inputs reordered as above."""
    options = dataclasses.replace(options, count_foreign_jobs=foreign)
    queues, usage = teams if with_queues == "drawn" else (None, None)
    if with_queues is True:
        queues = parse_queue_config(small.QUEUES)
    world = History(
        options,
        reordered_queues(queues, permute),
        usage,
        scaling=grows,
        permute=permute,
    )
    for step, failing in history:
        world.apply(step)
        world.fail_once = frozenset(failing)
        world.run_pass()
    assert world.passes == len(history)


def test_of_two_live_jobs_started_together_the_same_is_adopted_in_any_order() -> None:
    """A task with no status file and two live jobs of its spec started at the same second
    (a crash between two submits): the adopted one is the greater id, whichever order Ray
    listed them in (reconciler.core.task.reconcile._first_sight)."""
    spec = task(priority=1)
    meta = {META_QUEUE: "q", META_TASK: "a", META_SPEC_HASH: spec.spec_hash()}
    jobs = [RayJob(sid, RUNNING, start_time=5.0, metadata=meta) for sid in ("a-1", "a-2")]
    adopted = []
    for listing in (jobs, jobs[::-1]):
        result = plan(
            {"a": TaskInput("a", spec)},
            {},
            Observation({j.submission_id: j for j in listing}, Capacity(4, 0, 16 * GIB)),
            datetime.fromtimestamp(10.0, UTC),
            PlanOptions(queue_id="q"),
        )
        adopted.append(result.statuses["a"].status.submission_id)
    assert adopted == ["a-2", "a-2"]


def test_the_autoscaler_request_counts_foreign_jobs_in_one_order() -> None:
    """With foreign jobs counted, the request to the autoscaler lists their bundles by job id,
    not in Ray's listing order (reconciler.core.planner.scale_request)."""
    small = NodeType("small", Capacity(2, 0, 8 * GIB), max_count=4)
    foreign = [
        RayJob("x", RUNNING, start_time=1.0, entrypoint_cpus=1),
        RayJob("y", RUNNING, start_time=1.0, entrypoint_cpus=2),
    ]
    requests = []
    for listing in (foreign, foreign[::-1]):
        result = plan(
            {"big": TaskInput("big", task(cpu=2))},
            {},
            Observation(
                {j.submission_id: j for j in listing},
                Capacity(2, 0, 8 * GIB),
                scaling=Scaling(Capacity(8, 0, 32 * GIB), (small,)),
            ),
            datetime.fromtimestamp(10.0, UTC),
            PlanOptions(queue_id="q", count_foreign_jobs=True),
        )
        requests.append(result.scale_request)
    assert requests[0] and requests[0] == requests[1]
