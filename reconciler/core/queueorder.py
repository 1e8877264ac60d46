"""The queue's order kept between passes (issue 27), and the incremental planner's fast pass
over it: a pass redoes only what can change, so its cost follows change, not queue length.

Kept from the last pass (`Order`): the waiting tasks as a sorted list of their keys
(priority, queuedAt, name), updated with bisect by the tasks whose result changed; which tasks
are *quiet* (their result holds, has nothing to merge, and their status came out as given);
when each quiet result expires (a heap); the last plan's statuses and phase counts. A pass
then redoes only: the tasks whose version or run's job changed or whose result expired, the
loud ones (running, starting, unsettled), the walked head of the queue (the exact places and
the policy's walk up to `Admission.tail`), the tasks last walked, and the few whose position
bucket may change (those near each bucket edge, from the list). Everything else keeps its
status, by dict copy.

The fast pass holds only where it is known to equal `planner.plan` exactly: one queue, no
queue file error, Ray answering, no autoscaler, no preemption, no task with dependencies, in
an array, with an explicit submission id or named as a preemptor's victim, the clock not set
back, and the last pass's tail waiting for the same reason as this one's. Otherwise the full
pass runs, and leaves an `Order` for the next one when these hold again.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from itertools import compress
from operator import itemgetter, ne

from reconciler.core import admission, cleanup, planner, policies
from reconciler.core.admission import admit_prefix, place_far
from reconciler.core.decisions import Summary
from reconciler.core.planner import PassState, Plan, TaskInput, TaskResult
from reconciler.core.waits import NotConsidered, Waiting
from specs.arrays import split
from specs.cluster import RayJob
from specs.models import Phase, Reason, TaskStatus

Entry = tuple[int, float, str, str]  # a waiting task's key (priority, queuedAt, name), its name
_NAME = itemgetter(3)


@dataclass(frozen=True)
class Order:
    """What a pass leaves for the next fast one. Treat as immutable: a pass copies (at C
    speed) what it changes."""

    now: float
    versions: Mapping[str, Hashable]
    keys: list[Entry]  # every waiting task, sorted
    key_of: Mapping[str, Entry]
    loud: frozenset[str]  # the tasks not quiet (every other one is): merged every pass
    heap: list[tuple[float, str]]  # quiet results' ends (stale entries are skipped)
    watch: Mapping[str, str]  # a submission id a quiet task's status names -> that task
    jobs: Mapping[str, RayJob]
    statuses: Mapping[str, TaskStatus]  # the last plan's
    counts: tuple[int, int, int]  # queued, starting, running in those
    walked: tuple[str, ...]  # the head of the queue last walked one by one
    tail: Reason | None  # why every task past the walk waited; None: no such task
    started: int  # started in the last pass (still in `keys` then)
    flagged: frozenset[str]  # tasks that need the full pass (dependencies, arrays, ...)
    names: list[str]  # the specs' names, in the order given


@dataclass(frozen=True)
class Kept:
    """A task's result and what it was computed from (the incremental memo's entry)."""

    version: Hashable
    job: RayJob | None
    result: TaskResult


def run_job(jobs: Mapping[str, RayJob] | None, status: TaskStatus) -> RayJob | None:
    sid = status.status.submission_id
    return jobs.get(sid) if sid and jobs is not None else None


def reconcile(
    ctx: PassState,
    name: str,
    spec: TaskInput,
    status: TaskStatus | None,
    version: Hashable,
    previous: Mapping[str, Kept],
    kept: dict[str, Kept],
) -> TaskResult:
    """One task's result: last pass's if its inputs did not change and it still holds."""
    at = ctx.now
    if status is None:
        # First sight reads every job of the task, not one: cheap enough to always redo.
        kept.pop(name, None)
        return planner.reconcile_task(ctx.env, spec, status, at)
    entry = previous.get(name)
    job = run_job(ctx.obs.jobs, status)
    if (
        entry is None
        or version is None
        or entry.version != version
        or entry.job != job
        or not entry.result.valid_at(at)
    ):
        entry = Kept(version, job, planner.reconcile_task(ctx.env, spec, status, at))
    kept[name] = entry
    return entry.result


def fast_enough(ctx: PassState) -> bool:
    """Whether the pass-wide inputs allow the fast pass at all."""
    return (
        ctx.queues is None
        and ctx.queue_error is None
        and ctx.obs.available
        and ctx.obs.scaling is None
        and not ctx.env.preemption.any_on
    )


def _quiet(result: TaskResult, status: TaskStatus | None, out: TaskStatus | None) -> bool:
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


def _flagged(name: str, spec: TaskInput | None, result: TaskResult | None) -> bool:
    """A task whose presence needs the full pass."""
    if split(name) is not None:
        return True
    # An explicit id, also in a spec that a claim turned Invalid (its last valid one): a
    # claim ends when another task changes, which this task's own version does not show.
    claimant = spec.task or spec.last_valid if spec is not None else None
    if claimant is not None and claimant.spec.submission_id:
        return True
    if result is None:
        return False
    return result.body.preempted_by is not None or (
        result.waiter is not None and result.waiter.gated
    )


def _entry(name: str, result: TaskResult | None) -> Entry | None:
    if result is None or result.waiter is None:
        return None
    key = result.waiter.key
    return (key[0], key[1], key[2], name)


def _counts(statuses: Iterable[TaskStatus]) -> tuple[int, int, int]:
    phases = [s.status.phase for s in statuses]
    return (phases.count(Phase.QUEUED), phases.count(Phase.STARTING), phases.count(Phase.RUNNING))


def order_after_full(
    ctx: PassState,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    versions: Mapping[str, Hashable],
    results: Mapping[str, TaskResult],
    kept: Mapping[str, Kept],
    plan: Plan,
) -> Order | None:
    """The order a full pass leaves for the next fast one (None: the next cannot be fast)."""
    if not fast_enough(ctx) or ctx.walk is None:
        return None
    flagged = frozenset(n for n, spec in specs.items() if _flagged(n, spec, results.get(n)))
    if flagged:
        return None
    keys = sorted(e for n in specs if (e := _entry(n, results.get(n))) is not None)
    quiet = frozenset(
        n for n in specs if n in kept and _quiet(results[n], statuses.get(n), plan.statuses.get(n))
    )
    heap = [(results[n].valid_until, n) for n in quiet if results[n].valid_until < math.inf]
    heapify(heap)
    watch = {sid: n for n in quiet if (sid := statuses[n].status.submission_id) is not None}
    key_of = {e[3]: e for e in keys}
    loud = frozenset(specs) - quiet
    return _order(ctx, versions, keys, key_of, loud, heap, watch, plan, None, list(specs))


def _order(
    ctx: PassState,
    versions: Mapping[str, Hashable],
    keys: list[Entry],
    key_of: Mapping[str, Entry],
    loud: frozenset[str],
    heap: list[tuple[float, str]],
    watch: Mapping[str, str],
    plan: Plan,
    counts: tuple[int, int, int] | None,
    names: list[str] | None = None,
) -> Order:
    walk = ctx.walk
    assert walk is not None
    tail_at, tail, started = walk
    exact = ctx.options.exact_queue_positions
    head = len(keys) if tail_at is None else max(tail_at, exact + started)
    summary = plan.summary
    assert summary is not None
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
        counts=counts
        if counts is not None
        else (summary.queued, summary.starting, summary.running),
        walked=tuple(map(_NAME, keys[:head])),
        tail=tail.reason
        if tail is not None and tail_at is not None and tail_at < len(keys)
        else None,
        started=started,
        flagged=frozenset(),
        names=list(plan.statuses) if names is None else names,
    )


def fast_pass(
    ctx: PassState,
    order: Order,
    previous: Mapping[str, Kept],
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    versions: Mapping[str, Hashable],
    given: Collection[str] | None = None,
) -> tuple[Plan, dict[str, Kept], Order] | None:
    """`planner.finish`'s plan, redoing only what can have changed; None: this pass needs the
    full one (nothing of `ctx` is used then: the caller starts again)."""
    now = ctx.now
    if now < order.now or order.flagged:
        return None
    # What changed, at C speed: versions, names; what expired, from the heap.
    names = list(specs)
    changed = set(given) if given is not None else _changed(versions, order.versions)
    if names == order.names:  # the same tasks as last time (compared at C speed)
        deleted: set[str] = set()
    else:
        deleted = order.statuses.keys() - specs.keys()
    if names != list(versions):
        changed |= specs.keys() - versions.keys()
    heap = list(order.heap)
    redo = set(changed)
    while heap and heap[0][0] < now:
        item = heappop(heap)
        if _current(item, order.loud, previous):
            redo.add(item[1])
    jobs = ctx.obs.jobs or {}
    if jobs is not order.jobs:
        for sid in jobs.keys() | order.jobs.keys():
            if sid in order.watch and jobs.get(sid) != order.jobs.get(sid):
                redo.add(order.watch[sid])
    redo |= order.loud
    redo -= deleted
    redo &= specs.keys()
    # Each of them reconciled (or its result reused) and merged, in name order as in plan().
    kept = dict(previous)
    for name in deleted:
        kept.pop(name, None)
    results: dict[str, TaskResult] = {}
    merged = sorted(redo)
    for name in merged:
        results[name] = reconcile(
            ctx, name, specs[name], statuses.get(name), versions.get(name), previous, kept
        )
        if _flagged(name, specs[name], results[name]):
            return None
    for name in merged:
        planner.merge(ctx, name, results[name])
    # The quiet results' earliest end (a redone task's old entry is stale: its own counts).
    while heap and (heap[0][1] in redo or not _current(heap[0], order.loud, kept)):
        heappop(heap)
    if heap:
        ctx.until = min(ctx.until, heap[0][0])
    # The order, moved by the tasks whose key changed.
    keys, key_of = list(order.keys), dict(order.key_of)
    moves = 0
    for name in [*merged, *deleted]:
        old, new = key_of.get(name), _entry(name, results.get(name))
        if old == new:
            continue
        if old is not None:
            del keys[bisect_left(keys, old)]
            del key_of[name]
            moves += 1
        if new is not None:
            insort(keys, new)
            key_of[name] = new
            moves += 1

    def result_of(name: str) -> TaskResult:
        found = results.get(name)
        return found if found is not None else kept[name].result

    def adopt(name: str) -> None:
        """A quiet task admission looks at: its body and request, as merge() would give."""
        if name in results:
            return
        result = kept[name].result
        ctx.bodies[name] = result.body
        if result.conds:
            ctx.conds[name] = dict(result.conds)
        assert result.waiter is not None
        ctx.tasks[name] = result.waiter.task

    cleanup.stop_strays(ctx, ctx.env.ours, specs)
    # The head of the queue, long enough that the policy's walk ends in it.
    options = ctx.options
    head = options.exact_queue_positions + options.max_inflight + 2
    if options.policy != "strict":  # strict's walk ends at its first misfit
        head += options.backfill_candidates
    head = min(len(keys), head)
    while True:
        candidates = [_candidate(result_of(e[3])) for e in keys[:head]]
        walked = admission.walk_policy(ctx, candidates)
        if walked.tail is not None or head == len(keys):
            break
        head = min(len(keys), head * 4)

    def unchanged(name: str, reason: Reason, bucket: str) -> bool:
        if name in results:
            return False
        body = statuses[name].status
        return (
            body.queue_position is None
            and body.queue_position_bucket == bucket
            and body.reason == reason
        )

    walk = admit_prefix(ctx, candidates, walked, unchanged, adopt)
    started = len(walk.admission.start)
    tail_at, lack = walk.admission.tail or (None, None)
    if head < len(keys):
        assert lack is not None and tail_at is not None
        if order.tail is not None and order.tail is not lack.reason:
            return None  # the whole tail waits for another reason now: the full pass
        if isinstance(lack, NotConsidered):
            ctx.not_considered += len(keys) - head
        ctx.order.setdefault("", []).extend(map(_NAME, keys[head:]))
    ctx.walk = (tail_at, lack, started)
    # Past the head: the tasks that moved, were walked last time, or sit near a bucket edge.
    far: set[str] = set(order.walked)
    far.update(n for n in merged if n in key_of)
    shift = moves + abs(started - order.started)
    far.update(_near_edges(keys, head, started, shift, options.exact_queue_positions))
    far.update(
        n
        for n in _near_edges(order.keys, 0, order.started, shift, options.exact_queue_positions)
        if n in key_of
    )
    touched = set(merged) | set(walk.touched)
    for name in far:
        entry = key_of.get(name)
        if entry is None:
            continue
        position = bisect_left(keys, entry)
        if position < head:
            continue
        assert lack is not None
        adopt(name)
        place = position - started + 1
        waiting = Waiting(lack, position - started)
        if not unchanged(
            name, lack.reason, admission.position_bucket(place, options.exact_queue_positions)
        ):
            place_far(ctx, name, waiting, place)
            touched.add(name)
    cleanup.expire_finished_jobs(ctx, ctx.env.ours, _awaited(statuses, specs, merged))
    orphans = statuses.keys() - specs.keys()
    if orphans:
        cleanup.orphan_sidecars(ctx, specs, _in_order_of(statuses, orphans), ctx.env.ours)
    planner.collect_statuses(ctx, statuses, sorted(touched))
    out = dict(statuses)
    for name in orphans:
        del out[name]
    out.update(ctx.plan.statuses)
    queued, starting, running = order.counts
    for name in touched | deleted:
        for status, sign in ((order.statuses.get(name), -1), (out.get(name), 1)):
            if status is None:
                continue
            phase = status.status.phase
            queued += sign * (phase is Phase.QUEUED)
            starting += sign * (phase is Phase.STARTING)
            running += sign * (phase is Phase.RUNNING)
    summary = Summary(
        capacity=ctx.obs.capacity,
        used=ctx.used,
        queued=queued,
        starting=starting,
        running=running,
        queues=None,
        order=ctx.order,
        not_considered=ctx.not_considered,
    )
    plan = planner.freeze(ctx, statuses, out, summary, touched)
    # What the next pass keeps.
    loud = set(order.loud)
    watch = dict(order.watch)
    for name in touched | deleted | set(merged):
        was_quiet = name in order.statuses and name not in order.loud
        loud.discard(name)
        if was_quiet:
            gone = statuses[name].status.submission_id if name in statuses else None
            if gone is not None and watch.get(gone) == name:
                del watch[gone]
        if name in deleted:
            continue
        result = result_of(name) if name in kept else None
        if result is not None and _quiet(result, statuses.get(name), out.get(name)):
            named = statuses[name].status.submission_id
            if named is not None:
                watch[named] = name
            if (not was_quiet or name in results) and result.valid_until < math.inf:
                heappush(heap, (result.valid_until, name))
        else:
            loud.add(name)
    counts = (queued, starting, running)
    following = _order(
        ctx, versions, keys, key_of, frozenset(loud), heap, watch, plan, counts, names
    )
    return plan, kept, following


def _changed(versions: Mapping[str, Hashable], before: Mapping[str, Hashable]) -> set[str]:
    """The names whose version is new or differs, at C speed: compared in place when both
    list the same names in the same order (the loop builds them so), else as sets."""
    if len(versions) == len(before) and list(versions) == list(before):
        return set(compress(versions, map(ne, versions.values(), before.values())))
    return {n for n, _ in versions.items() - before.items()}


def _candidate(result: TaskResult) -> policies.Candidate:
    assert result.waiter is not None
    return result.waiter.candidate


def _current(item: tuple[float, str], loud: frozenset[str], kept: Mapping[str, Kept]) -> bool:
    until, name = item
    entry = kept.get(name)
    return name not in loud and entry is not None and entry.result.valid_until == until


def _near_edges(
    keys: list[Entry], head: int, started: int, shift: int, exact: int
) -> Iterable[str]:
    """The tasks whose place (position - started + 1) lies within `shift` of a bucket edge
    (exact, 10 exact, ...): only those can change bucket when places move by `shift`."""
    edge = exact
    while edge - shift <= len(keys):
        low = max(head, edge - shift - 1 + started)
        high = min(len(keys), edge + shift + 1 + started)
        for e in keys[low:high]:
            yield e[3]
        edge *= 10


def _awaited(
    statuses: Mapping[str, TaskStatus], specs: Mapping[str, TaskInput], merged: list[str]
) -> Mapping[str, TaskStatus]:
    """The statuses that may name an active run: a quiet task's never does."""
    names = [n for n in merged if n in statuses]
    names += [n for n in statuses.keys() - specs.keys()]
    return {n: statuses[n] for n in names}


def _in_order_of(statuses: Mapping[str, TaskStatus], names: set[str]) -> dict[str, TaskStatus]:
    if len(names) == 1:
        (name,) = names
        return {name: statuses[name]}
    return {n: s for n, s in statuses.items() if n in names}
