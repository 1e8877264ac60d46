"""The queues' order kept between passes, for the incremental planner's fast pass (the pass
itself: core/incremental/fastpass.py; here the order, the per-task memo, the full pass's
hand-over and where the fast pass holds): a pass redoes only what can change, so its cost
follows change, not queue length.

Kept from the last pass (`Order`): each queue's waiting tasks as a sorted list of their
entries (priority, queuedAt, name), updated with bisect by the tasks whose result changed;
which tasks are *quiet* (their result holds, has nothing to merge, and their status came out
as given); when each quiet result expires (a heap); the last plan's statuses and phase counts.
A pass then redoes only: the tasks whose version or run's job changed or whose result expired,
the loud ones (running, starting, unsettled), the walked front of each queue (the exact places
and the policy's walk up to `Admission.tail`), the tasks last walked, the few whose
position bucket may change (those near each bucket edge, from the lists), and every claimant
of an explicit submission id whose claimants, runs or jobs changed (`Order.claims`,
keptclaims: a claim ends when another task changes). Everything else keeps its status, by
dict copy.

With team queues (`_queues.yaml`) fair admission (quotas, borrowing and lending, weights,
decayed usage, maxRunning, nested queues) runs over the front of each queue only: it starts
with a few tasks of each and gives more to a queue whose walk did not end in what it got
(`FairAdmission.short`, `tails`); the exact places past a walk's end wait for its tail's lack.
Tasks too big for their queue (OverQuota) are handed to it wherever they stand. maxQueued:
each limited queue keeps its subtree's waiting tasks in arrival order (`Order.arrivals`); the
first `limit` count, the rest are QueueFull, placed after the counted ones (their entry's
`past_limit`), and left out of fair admission; a pass redoes the tasks that crossed the limit,
found within as many places of it as arrivals moved. Arrays' maxParallel: each capped array
keeps its waiting elements in queue order (`Order.arrays`); the first maxParallel less its
active elements are candidates, the rest wait for the cap (`Order.capped`) and are left out
of admission's walk, keeping their places; a pass judges again the arrays of the elements it
redid or moved (core/incremental/arraycaps.py) and places anew those whose cap changed.

Dependencies (core/incremental/keptgates.py): a waiting task with dependencies passes the
gates on what other tasks show, which its own version does not; the order keeps the
dependency graph, from each name the tasks that wait for it, what each such task showed them
and the cycles, and a pass gates again the dependents of every task whose view moved. The
kept entries and results of gated tasks are those after the gates (one held waits off the
queue: no entry).

On an autoscaling cluster (one queue), what depends on the whole queue is admission's demand
for nodes: the policy's walk again at the cluster's ceiling (`admit.scale_up`), which ends
where its tail is, as the walk of the moment does; a backoff, which only a task whose status
dates a request for nodes can sit out (`Order.asking`); and the starts the demand holds back
or lets through (`admit.keep_for_scale_up`). So the front grows until both walks end in it
and it holds every asking task. Under backfill, every task past the walk's end may wait
behind a front that waits for nodes, and any of them that fits what that front leaves
starts: the kept count of each request among the waiting tasks (`Order.requests`) tells
whether one could, and only then are they looked at, the front grown to the first that does.
Past the front nobody waits for nodes, and the request to the autoscaler reads the running
tasks (all loud) and the demand.

A queue file's error (no configuration valid since serve started: one queue, and every task
in it says so) is pass-wide: the fast pass holds while it stays the one its order was made
with (`Order.queue_error`), as each status it leaves says it.

Preemption runs over the walk of the fronts (core/incremental/frontpreemption.py): it reads
each queue's front and the queues' states after admission, which the walk holds, and the
running tasks, which are loud. The victims are kept by name (`Order.preempted`, with the tasks
waiting as a preemptor or a victim does, placed again each pass wherever they stand): while
one's stopped run is still live (it waits out of its queue's walk, its preemptor's room is
reserved wherever that stands), the pass reads the whole queue and is the full one's. A team
queue's preemptor whose victims stopped is admitted first: found over the victims.

The fast pass holds only where it is known to equal `planner.plan` exactly: the queue file's
error (or none) the same as the last pass's, Ray answering, no autoscaler with team queues (fair
admission at the ceiling grows its fronts by rules of its own) or with preemption (the demand
for nodes and the preemptors' would have to be walked together), at most one maxQueued in each
queue's chain (two, a queue's and its parent's, fill in turn over every arrival), the waiting
elements of each array agreeing on its maxParallel, no dependency that may name a whole array
(keptgates.names_an_array), no victim still stopping, the clock not set back, and each queue's
last tail waiting for the same reason as this one's. Otherwise the full pass runs, and leaves an
`Order` for the next one when these hold again. Ray not answering stays with the full pass: each
task's own result reads whether Ray answers (the memo's world), so the pass where it stops and
the one where it answers again redo every task whatever the pass; the passes between admit
nobody, start and stop nothing, so their cost holds nothing up, and a fast path for them would
be a second one, without admission, kept only for the outage.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from heapq import heapify
from itertools import compress
from operator import itemgetter, ne
from typing import NamedTuple

from reconciler.core import planner
from reconciler.core.admission import policies
from reconciler.core.admission.waits import ArrayAtMaxParallel, Lack, Waiting
from reconciler.core.admit import Admitted
from reconciler.core.fastcontext import FastPassContext
from reconciler.core.gates import Gated
from reconciler.core.incremental import frontpreemption, keptclaims, keptgates, ownwrites
from reconciler.core.incremental.frontadmission import FrontWalk, Worded
from reconciler.core.incremental.keptclaims import NO_CLAIMS, KeptClaims
from reconciler.core.incremental.keptgates import Gates
from reconciler.core.planner import PassInputs, Plan, TaskInput, TaskResult
from reconciler.core.queues import fairshare
from reconciler.core.queues.dispatch import QueueAdmission
from reconciler.core.stages import WalkEnd
from specs.cluster import Capacity, RayJob
from specs.queues.config import DEFAULT_QUEUE, QueueConfig
from specs.task.arrays import split
from specs.task.models import Reason
from specs.task.status import TaskStatus


class Entry(NamedTuple):  # one per waiting task: sorts as the queue's order, fields in turn
    """A waiting task's place in its queue's kept order."""

    # 1 if it is past its queue's maxQueued (QueueFull: its place comes after every counted
    # task's, as admit numbers them), else 0.
    past_limit: int
    rank: int  # then its key (QueueKey): -priority,
    queued_at: float  # queuedAt,
    name_order: str  # and its name's order (arrays' elements in index order)
    name: str  # the task


# Below every entry past maxQueued and above every counted one (priorities are 0..9).
_FIRST_PAST_LIMIT = Entry(1, -10, -math.inf, "", "")
# An entry's name at C speed (a fast pass lists every waiting task's past its queue's front):
# the item getter reads the field by its place, found from its name.
_NAME_OF = itemgetter(Entry._fields.index("name"))


def entry_names(entries: Iterable[Entry]) -> Iterator[str]:
    """The entries' task names, in their order (at C speed)."""
    return map(_NAME_OF, entries)


class Arrival(NamedTuple):
    """A task in the order in which maxQueued counts its queue's tasks."""

    queued_at: float
    name: str


class Expiry(NamedTuple):
    """A quiet task's result's end, in the kept heap (stale items are skipped)."""

    valid_until: float
    name: str


class Bound(NamedTuple):
    """The maxQueued a queue's tasks count in: the queue that sets it, and the limit."""

    queue: str
    limit: int


class PhaseCounts(NamedTuple):
    """How many of a plan's statuses are in each phase the summary counts."""

    queued: int
    starting: int
    running: int


class ExactPlaces(NamedTuple):
    """A team queue's exact places past its walk (fast pass), and what they came from."""

    front: int  # the walk's front's end in the queue's entries: the places' start
    end: int  # the places' end in them
    lack: Lack | None  # what they wait for
    ahead: int  # the tasks counted ahead of the first one
    started: int  # how many of the queue started


class ArrayCap(NamedTuple):
    """An array whose waiting elements admission caps by its maxParallel (arraycap.cap): those
    that count (not past maxQueued), in queue order; the first `open` (maxParallel less the
    array's active elements) are candidates, the rest wait for the cap (`wait`)."""

    entries: list[Entry]
    limit: int
    open: int
    wait: Waiting  # ArrayAtMaxParallel(array, limit)


def capped_names(cap: ArrayCap) -> Iterator[str]:
    """The array's elements that wait for its maxParallel."""
    return entry_names(cap.entries[cap.open :])


def array_cap(array: str, entries: list[Entry], limit: int, active: int) -> ArrayCap:
    """The cap of an array with these waiting elements (sorted), `active` of them running."""
    return ArrayCap(
        entries, limit, max(0, min(limit - active, len(entries))), capped_wait(array, limit)
    )


def capped_wait(array: str, limit: int) -> Waiting:
    return Waiting(ArrayAtMaxParallel(array, limit))


def max_parallel(result: TaskResult) -> int | None:
    """The maxParallel that caps a waiting element (None: none)."""
    waiter = result.waiter
    array = waiter.task.spec.array if waiter is not None else None
    return array.max_parallel if array is not None else None


def walk_index(names: Iterable[str], capped: Mapping[str, Waiting], at: int, end: int) -> int:
    """The index in a queue's entries (`names`) of the `at`th task its walk was given (the
    capped elements were not); `end` if it was given fewer."""
    if not capped:
        return at
    for index, name in enumerate(names):
        if name in capped:
            continue
        if at == 0:
            return index
        at -= 1
    return end


# Where each queue's walk ended, in the terms of its entries.
Walks = dict[str, WalkEnd]
NO_WALK = WalkEnd(None, None, 0)


@dataclass(frozen=True)
class Order:
    """What a pass leaves for the next fast one. Treat as immutable: a pass copies (at C
    speed) what it changes."""

    now: float
    versions: Mapping[str, Hashable]
    keys: Mapping[str, list[Entry]]  # every waiting task, sorted, by queue ("": no queues)
    key_of: Mapping[str, Entry]
    loud: frozenset[str]  # the tasks not quiet (every other one is): merged every pass
    heap: list[Expiry]  # quiet results' ends (stale entries are skipped)
    watch: Mapping[str, str]  # a submission id a quiet task's status names -> that task
    jobs: Mapping[str, RayJob]
    statuses: Mapping[str, TaskStatus]  # the last plan's
    counts: PhaseCounts  # in those
    walked: tuple[str, ...]  # the fronts of the queues last walked one by one
    tail: Mapping[str, Reason]  # by queue: why every task past its walk waited (if any did)
    started: Mapping[str, int]  # by queue: started in the last pass (still in `keys` then)
    names: list[str]  # the specs' names, in the order given
    # Team queues: the most each queue can ever hold (fairshare.ceilings); None without.
    ceilings: Mapping[str, fairshare.Ceiling] | None = None
    # The waiting tasks that ask for more than that: fair admission takes them out of its walk
    # wherever they stand (OverQuota), so each pass hands it every one of them.
    unfit: frozenset[str] = frozenset()
    # maxQueued (bounds_of): by queue, the queue whose limit it counts in, and the limit; by
    # such a queue, its subtree's waiting tasks in arrival order (the first `limit` count).
    bounds: Mapping[str, Bound] = dataclasses.field(default_factory=dict)
    arrivals: Mapping[str, list[Arrival]] = dataclasses.field(default_factory=dict)
    # Team queues: the wait and message of each task at an exact place (admit_queue_prefix).
    words: Mapping[str, Worded] = dataclasses.field(default_factory=dict)
    # Team queues, by queue: what its exact places past its walk were computed from (the
    # fast pass hands them back unchanged when this pass's are the same and its keys too).
    places: Mapping[str, ExactPlaces] = dataclasses.field(default_factory=dict)
    # The last plan's waiting tasks by queue (Summary.order), handed on for a queue whose keys
    # did not change and that started nothing in either pass.
    waiting: Mapping[str, list[str]] = dataclasses.field(default_factory=dict)
    # One queue: the policy's walk over its front in the last (fast) pass and what it read,
    # for the next to reuse when none of that changed (frontadmission.walk_front); None: walk
    # anew.
    front_walk: FrontWalk | None = None
    # Whether the pass that made this order reused the walk before it (tests count it).
    reused: bool = False
    # The sidecars without a spec the last plan was given.
    orphans: frozenset[str] = frozenset()
    # Dependencies: what the gates read, and each gated waiting task's result after them.
    gates: Gates = keptgates.NO_GATES
    # The explicit submission id claims: who claims, has run or holds a job of each id.
    claims: KeptClaims = NO_CLAIMS
    # By array with a maxParallel: its cap; by element that waits for it: that wait.
    arrays: Mapping[str, ArrayCap] = dataclasses.field(default_factory=dict)
    capped: Mapping[str, Waiting] = dataclasses.field(default_factory=dict)
    # On an autoscaling cluster: the waiting tasks whose status dates a request for nodes
    # (scale_up_requested_at). Only they can sit out a backoff, and only they may need it
    # cleared: each fast pass walks a front that holds them all.
    asking: frozenset[str] = frozenset()
    # On an autoscaling cluster with one queue: how many waiting tasks ask for each request,
    # so a pass knows without looking at each whether any of them could start on what a front
    # that waits for nodes leaves (admit.LeftOver).
    requests: Mapping[Capacity, int] = dataclasses.field(default_factory=dict)
    # The queue file's error the pass was planned with (PassInputs.queue_error): every task in
    # a queue says it (QueueConfigInvalid), so another one, or none, needs the full pass.
    queue_error: str | None = None
    # The tasks that bear a preemption (frontpreemption.marked): whose result's body names
    # their preemptor (the victims), or whose status waits as a preemptor or a victim.
    preempted: frozenset[str] = frozenset()


class Kept(NamedTuple):  # built per task per full pass: a tuple builds fastest
    """A task's result and what it was computed from (the incremental memo's entry): `held`,
    what Ray said its run's job holds (an active run is charged it: task.runs.keep_active)."""

    version: Hashable
    job: RayJob | None
    result: TaskResult
    held: Capacity | None = None


def run_job(jobs: Mapping[str, RayJob] | None, status: TaskStatus) -> RayJob | None:
    sid = status.status.submission_id
    return jobs.get(sid) if sid and jobs is not None else None


def run_held(held: Mapping[str, Capacity], status: TaskStatus) -> Capacity | None:
    """What Ray says the job of the run the status names holds (None: not observed)."""
    sid = status.status.submission_id
    return held.get(sid) if sid and held else None


def reconcile(
    ctx: PassInputs | FastPassContext,
    name: str,
    spec: TaskInput,
    status: TaskStatus | None,
    version: Hashable,
    previous: Mapping[str, Kept],
    kept: dict[str, Kept],
) -> TaskResult:
    """One task's result: last pass's if its inputs did not change and it still holds, or
    carried over to a new status when that is known to give the same (ownwrites.after_write)."""
    at = ctx.now
    if status is None:
        # First sight reads every job of the task, not one: always redone. Kept under no
        # version (never reused as it is), for the status it writes (ownwrites.after_write).
        result = planner.reconcile_task(ctx.env, spec, status, at)
        kept[name] = Kept(None, None, result)
        return result
    entry = previous.get(name)
    job = run_job(ctx.obs.jobs, status)
    held = run_held(ctx.obs.held, status)
    if entry is None or version is None:
        entry = Kept(version, job, planner.reconcile_task(ctx.env, spec, status, at), held)
    elif entry.version != version:
        # (a result carried over waits: it holds nothing, whatever its run's job holds)
        again = ownwrites.after_write(entry.result, spec, status)
        if again is None:
            again = planner.reconcile_task(ctx.env, spec, status, at)
        entry = Kept(version, job, again, held)
    elif entry.job != job or entry.held != held or not entry.result.valid_at(at):
        entry = Kept(version, job, planner.reconcile_task(ctx.env, spec, status, at), held)
    kept[name] = entry
    return entry.result


def fast_enough(ctx: PassInputs) -> bool:
    """Whether the pass-wide inputs allow the fast pass at all."""
    return (
        ctx.obs.available
        and (ctx.obs.scaling is None or (ctx.queues is None and not ctx.env.preemption.any_on))
        and (ctx.queues is None or bounds_of(ctx.queues) is not None)
    )


def bounds_of(config: QueueConfig) -> dict[str, Bound] | None:
    """By queue: the one queue of its chain (itself, the queues it lies in) with a maxQueued,
    and that limit. Its tasks count in arrival order (dispatch.queue_full): the first `limit`
    of that queue's whole subtree count, the rest are QueueFull. None: some chain holds two
    limits, so whether a task counts depends on how the two fill in turn (the full pass's)."""
    limits = {q.name: q.max_queued for q in config.spec.queues}
    limits[DEFAULT_QUEUE] = config.spec.default.max_queued
    bounds: dict[str, Bound] = {}
    for queue in limits:
        chain = [queue]
        while (parent := config.parent_of(chain[-1])) is not None:
            chain.append(parent)
        bounded = [Bound(q, limit) for q in chain if (limit := limits.get(q)) is not None]
        if len(bounded) > 1:
            return None
        if bounded:
            bounds[queue] = bounded[0]
    return bounds


def queue_of_task(ctx: PassInputs | FastPassContext, name: str) -> str:
    """The queue whose kept order holds the task ("": no team queues)."""
    return ctx.queues.queue_of(name) if ctx.queues is not None else ""


def is_quiet(result: TaskResult, status: TaskStatus | None, out: TaskStatus | None) -> bool:
    """Nothing of it to merge into a pass, and its status came out as it was given."""
    return (
        status is not None
        and out is status
        and not status.status.phase.active
        and not result.body.phase.active
        and not (result.events or result.submits or result.timeouts)
        and result.fetch_log is None
        and result.in_use is None
        and result.running is None
    )


def _waiting_entries(
    specs: Mapping[str, TaskInput], results: Mapping[str, TaskResult]
) -> list[Entry]:
    """Every waiting task's entry (entry_of), in the specs' order."""
    raw: list[Entry] = []
    for name in specs:
        entry = entry_of(name, results.get(name))
        if entry is not None:
            raw.append(entry)
    return raw


def entry_of(name: str, result: TaskResult | None, past_limit: int = 0) -> Entry | None:
    """A task's entry in the kept order; None if it does not wait."""
    if result is None or result.waiter is None:
        return None
    key = result.waiter.key
    return Entry(past_limit, key.rank, key.queued_at, key.name_order, name)


def counted_entries(entries: list[Entry]) -> int:
    """How many of a queue's entries count (the rest are past its maxQueued)."""
    return bisect_left(entries, _FIRST_PAST_LIMIT)


def candidate_of(result: TaskResult) -> policies.Candidate:
    """What a waiting task asks admission for."""
    assert result.waiter is not None
    return result.waiter.candidate


def order_after_full(
    ctx: PassInputs,
    admitted: Admitted | None,
    gated: Gated,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    versions: Mapping[str, Hashable],
    results: Mapping[str, TaskResult],
    kept: Mapping[str, Kept],
    plan: Plan,
) -> Order | None:
    """The order a full pass leaves for the next fast one (None: the next cannot be fast)."""
    if admitted is None or not fast_enough(ctx):
        return None
    if admitted.walk is None and admitted.queue_admission is None:
        return None
    gates, through = keptgates.after_full(specs, results, gated, ctx.options.visibility)
    if keptgates.names_an_array(gates):
        return None
    if through:  # the waiting tasks with dependencies: their results after the gates
        results = {**results, **through}
    raw = _waiting_entries(specs, results)
    bounds = bounds_of(ctx.queues) if ctx.queues is not None else {}
    assert bounds is not None  # fast_enough
    arrivals = _arrivals(ctx, raw, bounds)
    keys = _sorted_by_queue(ctx, raw, _past_limit(arrivals, bounds))
    arrays = _array_caps(keys, results)
    if arrays is None:
        return None
    capped = {n: cap.wait for cap in arrays.values() for n in capped_names(cap)}
    ceilings = None
    unfit: frozenset[str] = frozenset()
    if ctx.queues is not None:
        capacity = ctx.obs.capacity
        assert capacity is not None
        ceilings = fairshare.ceilings(fairshare.resolve(ctx.queues, capacity), capacity)
        unfit = frozenset(
            e.name
            for queue, entries in keys.items()
            for e in entries
            if not e.past_limit
            and fairshare.never_fits(candidate_of(results[e.name]), ceilings[queue])
        )
    out = plan.statuses
    quiet = frozenset(  # (a task without a status given is never quiet: a cold start's all)
        n
        for n in specs
        if n in kept
        and (status := statuses.get(n)) is not None
        and is_quiet(results[n], status, out.get(n))
    )
    heap = [Expiry(results[n].valid_until, n) for n in quiet if results[n].valid_until < math.inf]
    heapify(heap)
    watch = {sid: n for n in quiet if (sid := statuses[n].status.submission_id) is not None}
    summary = plan.summary
    assert summary is not None
    key_of = {e.name: e for entries in keys.values() for e in entries}
    return next_order(
        ctx,
        plan,
        waiting=admitted.order,
        versions=versions,
        keys=keys,
        key_of=key_of,
        loud=frozenset(specs) - quiet,
        heap=heap,
        watch=watch,
        walks=_walks(ctx, admitted, keys, unfit, capped),
        counts=PhaseCounts(summary.queued, summary.starting, summary.running),
        names=list(specs),
        ceilings=ceilings,
        unfit=unfit,
        bounds=bounds,
        arrivals=arrivals,
        orphans=frozenset(statuses.keys() - specs.keys()),
        gates=gates,
        claims=keptclaims.claims_after_full(ctx.read, specs, statuses, ctx.env.ours),
        arrays=arrays,
        capped=capped,
        asking=asking_after(ctx, frozenset(), key_of, out, key_of),
        requests=_requests_of(ctx, key_of, results),
        preempted=frozenset(n for n in specs if frontpreemption.marked(results[n], out.get(n))),
    )


def _array_caps(
    keys: Mapping[str, list[Entry]], results: Mapping[str, TaskResult]
) -> dict[str, ArrayCap] | None:
    """By array with a maxParallel: its cap (admission's, arraycap.cap). None: the waiting
    elements of one array disagree on its maxParallel (the cap's walk then reads each)."""
    members: dict[str, list[Entry]] = {}
    limits: dict[str, int] = {}
    for entries in keys.values():
        for e in entries:
            parts = split(e.name)
            if parts is None or e.past_limit:
                continue
            limit = max_parallel(results[e.name])
            if limit is None:
                continue
            if limits.setdefault(parts[0], limit) != limit:
                return None
            members.setdefault(parts[0], []).append(e)
    if not members:
        return {}
    active: Counter[str] = Counter()
    for name, result in results.items():
        parts = split(name)
        if parts is not None and result.body.phase.active:
            active[parts[0]] += 1
    return {
        array: array_cap(array, sorted(entries), limits[array], active[array])
        for array, entries in members.items()
    }


def _requests_of(
    ctx: PassInputs, key_of: Mapping[str, Entry], results: Mapping[str, TaskResult]
) -> dict[Capacity, int]:
    """Order.requests: by request, how many waiting tasks ask for it."""
    if ctx.obs.scaling is None or ctx.queues is not None:
        return {}
    return dict(Counter(candidate_of(results[name]).request for name in key_of))


def _arrivals(
    ctx: PassInputs, raw: list[Entry], bounds: Mapping[str, Bound]
) -> dict[str, list[Arrival]]:
    """By queue with a maxQueued: its subtree's waiting tasks in arrival order."""
    arrivals: dict[str, list[Arrival]] = {}
    for e in raw:
        bound = bounds.get(queue_of_task(ctx, e.name))
        if bound is not None:
            arrivals.setdefault(bound.queue, []).append(Arrival(e.queued_at, e.name))
    for arrived in arrivals.values():
        arrived.sort()
    return arrivals


def _past_limit(arrivals: Mapping[str, list[Arrival]], bounds: Mapping[str, Bound]) -> set[str]:
    """The tasks past their queue's maxQueued: those that arrived after the first `limit`."""
    limits = dict(bounds.values())
    full: set[str] = set()
    for group, arrived in arrivals.items():
        full.update(a.name for a in arrived[limits[group] :])
    return full


def _sorted_by_queue(ctx: PassInputs, raw: list[Entry], full: set[str]) -> dict[str, list[Entry]]:
    """Each queue's entries, sorted, those of `full` marked past its limit."""
    keys: dict[str, list[Entry]] = {}
    if ctx.queues is None:  # one queue, and none of it full (no maxQueued without queues)
        if raw:
            raw.sort()
            keys[""] = raw
        return keys
    for e in sorted(e._replace(past_limit=1) if e.name in full else e for e in raw):
        keys.setdefault(queue_of_task(ctx, e.name), []).append(e)
    return keys


def _walks(
    ctx: PassInputs,
    admitted: Admitted,
    keys: Mapping[str, list[Entry]],
    unfit: frozenset[str],
    capped: Mapping[str, Waiting],
) -> Walks:
    """Where each queue's walk ended this pass, in the terms of its keys."""
    if ctx.queues is None:
        walk = admitted.walk
        assert walk is not None
        if walk.tail_at is not None and capped:
            entries = keys.get("", [])
            at = walk_index(entry_names(entries), capped, walk.tail_at, len(entries))
            walk = walk._replace(tail_at=at)
        return {"": walk}
    assert admitted.queue_admission is not None
    return walk_ends(admitted.queue_admission, keys, unfit, capped)


def walk_ends(
    fair: QueueAdmission,
    keys: Mapping[str, list[Entry]],
    unfit: frozenset[str],
    capped: Mapping[str, Waiting],
) -> Walks:
    """Where each team queue's walk ended in `fair`, in the terms of its entries."""
    started: dict[str, int] = {}
    for name in fair.start:
        owner = fair.queue_of[name]
        started[owner] = started.get(owner, 0) + 1
    walks: Walks = {}
    begun = set(fair.start)
    for queue, entries in keys.items():
        count = started.get(queue, 0)
        tail = fair.tails.get(queue)
        if tail is None:
            walks[queue] = WalkEnd(None, None, count)
            continue
        # A tail counts the tasks its walk kept: neither started nor too big for the queue (nor
        # past maxQueued or capped by their array: those were not handed to it).
        at = counted = counted_entries(entries)
        left = tail.at
        for index, entry in enumerate(entries[:counted]):
            if entry.name in begun or entry.name in unfit or entry.name in capped:
                continue
            if left == 0:
                at = index
                break
            left -= 1
        walks[queue] = WalkEnd(at, tail.lack, count)
    return walks


def next_order(
    ctx: PassInputs | FastPassContext,
    plan: Plan,
    *,
    waiting: Mapping[str, list[str]],
    versions: Mapping[str, Hashable],
    keys: Mapping[str, list[Entry]],
    key_of: Mapping[str, Entry],
    loud: frozenset[str],
    heap: list[Expiry],
    watch: Mapping[str, str],
    walks: Walks,
    counts: PhaseCounts,
    names: list[str],
    ceilings: Mapping[str, fairshare.Ceiling] | None,
    unfit: frozenset[str],
    bounds: Mapping[str, Bound],
    arrivals: Mapping[str, list[Arrival]],
    words: Mapping[str, Worded] | None = None,
    places: Mapping[str, ExactPlaces] | None = None,
    front_walk: FrontWalk | None = None,
    reused: bool = False,
    orphans: frozenset[str] = frozenset(),
    gates: Gates = keptgates.NO_GATES,
    claims: KeptClaims = NO_CLAIMS,
    arrays: Mapping[str, ArrayCap] | None = None,
    capped: Mapping[str, Waiting] | None = None,
    asking: frozenset[str] = frozenset(),
    requests: Mapping[Capacity, int] | None = None,
    preempted: frozenset[str] = frozenset(),
) -> Order:
    """The order a pass that planned `plan` leaves for the next fast one."""
    exact = ctx.options.exact_queue_positions
    walked: list[str] = []
    tails: dict[str, Reason] = {}
    started: dict[str, int] = {}
    for queue, entries in keys.items():
        walk = walks.get(queue, NO_WALK)
        counted = counted_entries(entries)
        front = max(counted if walk.tail_at is None else walk.tail_at, exact + walk.started)
        walked.extend(entry_names(entries[:front]))
        if walk.lack is not None and walk.tail_at is not None and walk.tail_at < counted:
            tails[queue] = walk.lack.reason
        started[queue] = walk.started
    return Order(
        now=ctx.now,
        versions=versions,  # the caller's: it must not change it afterwards
        keys=keys,
        key_of=key_of,
        loud=loud,
        heap=heap,
        watch=watch,
        jobs=ctx.obs.jobs or {},
        statuses=plan.statuses,
        counts=counts,
        walked=tuple(walked),
        tail=tails,
        started=started,
        names=names,
        ceilings=ceilings,
        unfit=unfit,
        bounds=bounds,
        arrivals=arrivals,
        words={} if words is None else words,
        places={} if places is None else places,
        waiting=waiting,
        front_walk=front_walk,
        reused=reused,
        orphans=orphans,
        gates=gates,
        claims=claims,
        arrays={} if arrays is None else arrays,
        capped={} if capped is None else capped,
        asking=asking,
        requests={} if requests is None else requests,
        queue_error=ctx.queue_error,
        preempted=preempted,
    )


def asking_after(
    ctx: PassInputs | FastPassContext,
    asking: frozenset[str],
    names: Iterable[str],
    out: Mapping[str, TaskStatus],
    waiting: Mapping[str, Entry],
) -> frozenset[str]:
    """`asking` (Order.asking), each of `names` judged anew by its status in `out`: those
    that wait and date a request for nodes. Empty on a fixed cluster (a change to or from
    an autoscaler sends the pass to the full planner: the memo's world changed)."""
    if ctx.obs.scaling is None:
        return frozenset()
    now = set(asking)
    for name in names:
        status = out.get(name)
        if name in waiting and status is not None and status.status.scale_up_requested_at:
            now.add(name)
        else:
            now.discard(name)
    return frozenset(now)


def changed_names(versions: Mapping[str, Hashable], before: Mapping[str, Hashable]) -> set[str]:
    """The names whose version is new or differs, at C speed: compared in place when both
    list the same names in the same order (the loop builds them so), else as sets."""
    if len(versions) == len(before) and list(versions) == list(before):
        return set(compress(versions, map(ne, versions.values(), before.values())))
    return {n for n, _ in versions.items() - before.items()}
