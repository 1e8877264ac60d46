"""The planner, incrementally: the same plan as `planner.plan`, without redoing the work of
tasks whose inputs did not change.

Each task's own reconcile (`planner.reconcile_task`) depends only on its spec, its previous
status, the Ray job its run's id names, the pass-wide options and observation, and `now`; its
result says over which span of `now` it holds (a timeout, a retry's backoff or a missing
job's grace period ends it; a result that wrote the clock into a status holds for that instant
only). So a task whose version (the generations of its spec and status, which the caller
gets from the store) is that of the last pass, whose run's job is the same, and whose result
still holds at this `now`, reuses last pass's result. What needs
all tasks at once (stray jobs, dependencies, the queue's order and admission, clean-up) runs
over the merged results every pass, as in `plan`.

Pure like `plan`: the memo is a value the caller passes in and gets back, never a hidden cache,
and an empty memo gives `plan`'s work exactly. This is the entry every caller plans with: the
loop, the simulator and `rayqueue plan` (with an empty memo); `planner.plan` stays as the
reference the property tests compare it against.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from reconciler.core import planner
from reconciler.core.fastcontext import FastPassContext
from reconciler.core.incremental import fastpass, keptclaims, keptorder, ownwrites
from reconciler.core.incremental.keptorder import Kept, Order
from reconciler.core.incremental.standing import NOTHING_SHOWN, Standing, after_plan
from reconciler.core.planner import Observation, Plan, TaskInput, TaskResult
from reconciler.core.queues.usage import QueueUsage
from specs.cluster import Capacity, NodeType
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions
from specs.task.status import TaskStatus
from specs.task.submission_ids import SeenClaim

# Everything every task's own reconcile reads besides its own inputs and the clock: when any
# of it changes, no earlier result is reused. The queue config is in it for the preemption
# grace period a (re)submitted job gets from its queue.
World = tuple[
    PlanOptions,
    Capacity | None,
    bool,
    str | None,
    QueueConfig | None,
    tuple[Capacity, tuple[NodeType, ...]] | None,
]


@dataclass(frozen=True)
class Memo:
    """What one pass hands the next; treat as immutable. A new loop starts from EMPTY."""

    world: World | None = None
    kept: Mapping[str, Kept] = field(default_factory=dict)
    # The queue's order and what the fast pass needs (reconciler.core.incremental.keptorder);
    # None: the next pass is a full one.
    order: Order | None = None
    # Whether the pass that made this memo took the fast pass (tests and benchmarks count it).
    fast: bool = False
    # How many waiting tasks it took as quiet though the loop had just written their status
    # (_carry_written; tests and benchmarks count them).
    carried_over: int = 0
    # The plan that stands while nothing but the loop's own writes of it changes
    # (reconciler.core.incremental.standing); None: the next pass is planned.
    standing: Standing | None = None
    # Whether this pass stood: its plan is `standing.plan`, not planned.
    stood: bool = False
    # The names changed since `order` was made, in the passes that stood (None: not known).
    unplanned: frozenset[str] | None = frozenset()

    @property
    def still(self) -> bool:
        """Whether a still plan stands: while no task changes, only Ray, the clock and the
        caller's inputs can bring the planned pass back (`stands`)."""
        return self.standing is not None and self.standing.written is None


@dataclass(frozen=True)
class Stand:
    """How a caller lets a plan stand (the loop; the simulator and `rayqueue plan` plan
    every pass): `inputs`, a value that changes whenever what it plans from besides the tasks
    and Ray does (the queue file's generation, git's revision); `settled`: whether its read of
    the tasks is complete (no file settling): a plan stands only on a complete read."""

    inputs: Hashable
    settled: bool


EMPTY = Memo()
_DEFAULTS = PlanOptions()


def _world(observed: Observation, options: PlanOptions, queues: QueueConfig | None) -> World:
    grow = observed.scaling
    # Each task's own part reads the ceiling and node types (Unschedulable); the rest of the
    # autoscaler's report (pending nodes, failures) only admission reads, every pass.
    ceiling = (grow.ceiling, grow.node_types) if grow is not None else None
    return (options, observed.capacity, observed.available, observed.error, queues, ceiling)


def _carry_written(
    order: Order,
    previous: Mapping[str, Kept],
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    versions: Mapping[str, Hashable],
    changed: Collection[str] | None,
    observed: Observation,
) -> tuple[Order, Mapping[str, Kept], Collection[str]]:
    """The fast pass's inputs, with each waiting task whose version changed only because the
    loop wrote the status the last plan gave it (the very object) taken as quiet: its result
    carried over to that status (ownwrites.after_write), its place in the order unchanged. Such
    a task is then just like one whose status that plan left as it was: the fast pass redoes
    it only where its place or bucket may move. Anything else stays changed, and so does a
    task whose status now records another run of an explicit id (keptclaims: the claims of
    that id are judged again)."""
    given = (
        set(changed) if changed is not None else keptorder.changed_names(versions, order.versions)
    )
    last, loud, jobs = order.statuses, order.loud, observed.jobs
    carried: dict[str, Kept] = {}
    for name in given:
        status = statuses.get(name)
        if status is None or status is not last.get(name) or name not in loud:
            continue
        if name not in specs:  # its spec was deleted: the pass decides what becomes of it
            continue
        if keptclaims.recorded_of(status) != order.claims.recorded.get(name):
            continue
        entry = previous.get(name)
        if entry is None or (waiter := entry.result.waiter) is None:
            continue
        again = ownwrites.after_write(entry.result, specs[name], status)
        # Its place in the order moved (queuedAt), or it is a preemptor's victim, redone so
        # that its pass finds it (the kept victims are those of results made by a pass, not
        # carried). Its name and spec, the same Task, were judged when its result was made.
        if again is None or again.waiter != waiter or again.body.preempted_by is not None:
            continue
        job, held = keptorder.run_job(jobs, status), keptorder.run_held(observed.held, status)
        carried[name] = Kept(versions[name], job, again, held)
    if not carried:
        return order, previous, given
    quiet = replace(order, loud=loud - carried.keys())
    return quiet, {**previous, **carried}, given - carried.keys()


def stands(memo: Memo, observed: Observation, now: datetime, inputs: Hashable) -> bool:
    """Whether the last pass's still plan stands at `now` for that answer from Ray and those
    inputs, while no task changes: a caller that knows nothing changed need not read them."""
    standing = memo.standing
    return memo.still and standing is not None and standing.holds(observed, now.timestamp(), inputs)


def without_standing(memo: Memo) -> Memo:
    """`memo` with no plan to stand: the next pass is planned (the caller could not write
    what the plan gave, or wants a full pass)."""
    return memo if memo.standing is None else replace(memo, standing=None, stood=False)


def _stood(
    memo: Memo,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    observed: Observation,
    now: datetime,
    versions: Mapping[str, Hashable] | None,
    changed: Collection[str] | None,
    stand: Stand | None,
) -> Memo | None:
    """The memo of a pass whose plan stands (Standing), or None: it is planned. What changed
    in it is kept for the pass that plans next (Memo.unplanned)."""
    standing = memo.standing
    if (
        stand is None
        or not stand.settled
        or standing is None
        or versions is None
        or not standing.holds(observed, now.timestamp(), stand.inputs)
        or not standing.read_the_same(specs, statuses, versions, changed)
    ):
        return None
    if standing.written is not None:
        standing = standing.settled(versions, specs, statuses)
    return replace(memo, standing=standing, stood=True, unplanned=_since_order(memo, changed))


def _since_order(memo: Memo, changed: Collection[str] | None) -> frozenset[str] | None:
    """The names changed since the memo's order was made, this pass's `changed` with them."""
    if memo.unplanned is None or changed is None:
        return None
    if not changed:
        return memo.unplanned
    return memo.unplanned | frozenset(changed)


def plan_incremental(
    memo: Memo,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    observed: Observation,
    now: datetime,
    options: PlanOptions = _DEFAULTS,
    *,
    queues: QueueConfig | None = None,
    usage: QueueUsage | None = None,
    versions: Mapping[str, Hashable] | None = None,
    queue_error: str | None = None,
    changed: Collection[str] | None = None,
    stand: Stand | None = None,
    seen_claims: Mapping[str, SeenClaim] | None = None,
) -> tuple[Plan, Memo]:
    """`planner.plan(specs, statuses, observed, now, options, queues=queues)`, and the memo
    for the next pass. `versions`: each task's version, a value that changes whenever its spec
    or its status does (the loop builds it from the store's generations); a task without one
    is always reconciled anew. `changed`: the names whose version differs from the pass
    before's (this memo's) and those of the sidecars read anew (a spec's or not), when the
    caller knows them; else they are found by comparing `versions`, and every sidecar is
    looked at for a spec. `stand`: the caller lets a plan stand (Stand): a pass whose tasks
    are those the last plan stands on (standing.Standing) is answered with that plan, and the
    memo says it stood (`stood`). `seen_claims`: when the scheduler first saw each task claim
    its explicit id (planner.plan's); a task's record changes only with its claim."""
    stood = _stood(memo, specs, statuses, observed, now, versions, changed, stand)
    if stood is not None:
        assert stood.standing is not None
        return stood.standing.plan, stood
    if memo.unplanned is None:
        changed = None
    elif changed is not None and memo.unplanned:
        changed = memo.unplanned | frozenset(changed)
    given = _Given(options, queues, usage, queue_error, seen_claims or {})
    plan, after = _plan(memo, specs, statuses, observed, now, given, versions, changed)
    if stand is None:
        return plan, after
    at = now.timestamp()
    if plan.still and not stand.settled:
        return plan, after
    shown = after.order.gates.seen if after.order is not None else NOTHING_SHOWN
    standing = after_plan(
        plan, observed, at, after.fast, stand.inputs, specs, statuses, versions or {}, shown
    )
    return plan, replace(after, standing=standing)


@dataclass(frozen=True)
class _Given:
    """What the caller hands a pass besides the tasks, Ray and the clock."""

    options: PlanOptions
    queues: QueueConfig | None
    usage: QueueUsage | None
    queue_error: str | None
    seen_claims: Mapping[str, SeenClaim]

    def begin(
        self,
        specs: Mapping[str, TaskInput],
        statuses: Mapping[str, TaskStatus],
        observed: Observation,
        now: datetime,
    ) -> planner.PassInputs:
        return planner.begin(
            specs,
            statuses,
            observed,
            now,
            self.options,
            self.queues,
            self.usage,
            self.queue_error,
            self.seen_claims,
        )


def _plan(
    memo: Memo,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    observed: Observation,
    now: datetime,
    given: _Given,
    versions: Mapping[str, Hashable] | None,
    changed: Collection[str] | None,
) -> tuple[Plan, Memo]:
    world = _world(observed, given.options, given.queues)
    previous = memo.kept if memo.world == world else {}
    if memo.order is not None and previous and versions:
        inputs = given.begin(specs, statuses, observed, now)
        if keptorder.fast_enough(inputs):
            told = changed is not None
            kept_order, known, changed = _carry_written(
                memo.order, previous, specs, statuses, versions, changed, observed
            )
            # The tasks carried over: their results moved without a redo (what they show
            # their dependents too).
            moved = memo.order.loud - kept_order.loud if kept_order is not memo.order else ()
            done = fastpass.fast_pass(
                FastPassContext(inputs=inputs),
                kept_order,
                known,
                specs,
                statuses,
                versions,
                changed,
                told,
                moved,
            )
            if done is not None:
                carried = len(memo.order.loud) - len(kept_order.loud)
                return done[0], Memo(world, done[1], done[2], fast=True, carried_over=carried)
    ctx = given.begin(specs, statuses, observed, now)
    merged = planner.TaskMerge()
    versions = versions or {}
    read = specs
    specs = planner.with_id_claims(specs, statuses, ctx)
    kept: dict[str, Kept] = {}
    results: dict[str, TaskResult] = {}
    for name in sorted(specs):
        spec = specs[name]
        version = versions.get(name)
        if spec.task is None and read[name].task is not None:
            version = None  # turned Invalid by an id claim: not what the version describes
        result = keptorder.reconcile(ctx, name, spec, statuses.get(name), version, previous, kept)
        results[name] = result
        merged.add(name, result)
    stages = planner.run_stages(ctx, merged.done(), specs, statuses)
    plan = stages.plan
    order: Order | None = None
    if versions:
        order = keptorder.order_after_full(
            ctx, stages.admitted, stages.gated, specs, statuses, versions, results, kept, plan
        )
    return plan, Memo(world, kept, order)
