"""The incremental planner's fast pass over the queues' kept order (core/incremental/keptorder.py
holds the order, the per-task memo and the full pass's hand-over): a pass redoes only the tasks
whose inputs changed, the loud ones, the walked front of each queue and the few near a
position-bucket edge; every other status is handed back as it was. Where it holds, and why it
equals `planner.plan`, is keptorder's docstring.

The pass runs in steps, each a function of what the ones before it found: what changed
(`_changes`) and the claimants of explicit ids whose claims it touched
(`keptclaims.claims_after`), those tasks redone (`_reconcile_redone`, with the gated tasks
whose dependencies moved: keptgates.gate_again), the kept order moved by them
(`_reorder`), admission over each queue's front (`_admit_one_queue`, `_admit_team_queues`,
preemption over it: core/incremental/frontpreemption.py), the places past the fronts
(`_wait_past_fronts`, `_place_far`), the statuses collected (`_collect`), and what the next
pass keeps (`_quiet_after`, `_marked_after`, `keptorder.next_order`)."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import NamedTuple

from reconciler.core.admission.policies import Admission, Candidate
from reconciler.core.admission.waits import NotConsidered, QueueFull, Waiting
from reconciler.core.admit import position_bucket
from reconciler.core.decisions import Summary
from reconciler.core.fastcontext import FastPassContext
from reconciler.core.incremental import (
    arraycaps,
    frontadmission,
    frontpreemption,
    keptclaims,
    keptgates,
)
from reconciler.core.incremental.frontadmission import FrontWalk, Worded, admit_prefix, place_far
from reconciler.core.incremental.keptclaims import KeptClaims
from reconciler.core.incremental.keptgates import Gates
from reconciler.core.incremental.keptorder import (
    NO_WALK,
    ArrayCap,
    Arrival,
    Bound,
    Entry,
    ExactPlaces,
    Expiry,
    Kept,
    Order,
    PhaseCounts,
    Walks,
    asking_after,
    candidate_of,
    changed_names,
    counted_entries,
    entry_names,
    entry_of,
    is_quiet,
    next_order,
    queue_of_task,
    reconcile,
    walk_ends,
    walk_index,
)
from reconciler.core.planner import Plan, TaskInput, TaskResult, refused_claim, scale_request
from reconciler.core.queues import fairshare
from reconciler.core.queues.dispatch import QueueAdmission
from reconciler.core.queues.shareresult import OwnTest
from reconciler.core.stages import walk_end
from specs.cluster import Capacity
from specs.task.models import Phase, Reason
from specs.task.status import TaskStatus, TaskStatusBody

# Each team queue's front given to fair admission on the fast pass's first try.
_TEAM_FRONT = 8


def fast_pass(
    ctx: FastPassContext,
    order: Order,
    previous: Mapping[str, Kept],
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    versions: Mapping[str, Hashable],
    given: Collection[str] | None = None,
    told: bool = False,
    carried: Collection[str] = (),
) -> tuple[Plan, dict[str, Kept], Order] | None:
    """`planner.finish`'s plan, redoing only what can have changed; None: this pass needs the
    full one (nothing of `ctx` is used then: the caller starts again). `told`: `given`
    came from the caller and names every sidecar read anew too (a spec's or not). `carried`:
    the tasks whose result in `previous` is new, carried over to the status the loop wrote."""
    if ctx.now < order.now or ctx.queue_error != order.queue_error:
        return None
    names = list(specs)
    changes = _changes(ctx, order, previous, specs, versions, names, given)
    deleted = changes.deleted
    kept = dict(previous)
    for name in deleted:
        kept.pop(name, None)
    maybe = order.orphans | deleted | set(given or ()) if told else None
    orphans = _orphans(statuses, specs, maybe)
    claims = _claims_judged(ctx, order, specs, statuses, changes, orphans)
    redone = _reconcile_redone(
        ctx, order.gates, changes, specs, statuses, versions, previous, kept, carried, claims
    )
    if redone is None:
        return None
    results, gates = redone
    merged = sorted(results)
    tasks = _TaskResults(ctx, statuses, results, kept, gates.gated)
    victims = frontpreemption.victims_of(order.preempted, results, specs, tasks.result_of)
    preemptors = frontpreemption.preemptors(
        ctx, order.preempted | results.keys(), tasks.result_of, specs
    )
    if frontpreemption.stopping(ctx, victims, preemptors):
        return None
    ctx.ready = frontpreemption.ready(victims, tasks.result_of, specs, preemptors)
    heap = changes.heap
    requests: Mapping[Capacity, int] = {}
    # The quiet results' earliest end (a redone task's old entry is stale: its own counts).
    while heap and (heap[0].name in results or not _current(heap[0], order.loud, kept)):
        heappop(heap)
    if heap:
        ctx.until = min(ctx.until, heap[0].valid_until)
    moved = _reorder(ctx, order, merged, deleted, results, kept)
    caps = arraycaps.recap(
        order, [*merged, *moved.news, *deleted], moved.key_of, results, tasks.result_of
    )
    if caps is None:
        return None
    moved.arrays, moved.capped, moved.recapped = caps
    ctx.stop_strays(specs)
    if ctx.queues is None:
        asking = _asking(ctx, order, merged, results, moved.key_of)
        requests = _requests(ctx, order, previous, [*merged, *deleted], tasks, moved.key_of)
        fronts = _admit_one_queue(ctx, order, moved, tasks, merged, asking, requests)
    else:
        fronts = _admit_team_queues(ctx, order, moved, tasks, merged)
    if not _wait_past_fronts(ctx, order, moved, fronts):
        return None
    _place_far(ctx, order, moved, fronts, tasks, _far_names(ctx, order, moved, fronts, merged))
    touched = fronts.touched
    ctx.scale_request = scale_request(
        ctx.inputs, specs, ctx.charged_use, ctx.tasks, ctx.scale_demand
    )
    plan, out, counts = _collect(ctx, order, specs, statuses, merged, deleted, orphans, fronts)
    moving = touched | deleted | set(merged)  # the tasks whose status this pass may move
    loud, watch = _quiet_after(order, statuses, out, tasks, heap, moving, deleted)
    preempted = _marked_after(order, out, tasks, moving, deleted)
    following = next_order(
        ctx,
        plan,
        waiting=ctx.order,
        versions=versions,
        keys=moved.keys,
        key_of=moved.key_of,
        loud=loud,
        heap=heap,
        watch=watch,
        walks=fronts.walks,
        counts=counts,
        names=names,
        ceilings=order.ceilings,
        unfit=frozenset(moved.unfit),
        bounds=order.bounds,
        arrivals=moved.arrivals,
        words=fronts.spoken,
        places=fronts.places,
        front_walk=fronts.front_walk,
        reused=fronts.reused,
        orphans=frozenset(orphans),
        gates=gates,
        claims=claims,
        arrays=moved.arrays,
        capped=moved.capped,
        asking=asking_after(ctx, order.asking, touched | deleted, out, moved.key_of),
        requests=requests,
        preempted=preempted,
    )
    return plan, kept, following


def _asking(
    ctx: FastPassContext,
    order: Order,
    merged: list[str],
    results: Mapping[str, TaskResult],
    key_of: Mapping[str, Entry],
) -> set[str]:
    """The waiting tasks whose status dates a request for nodes (Order.asking), the redone
    ones judged by their own result (their status may be new)."""
    if ctx.obs.scaling is None:
        return set()
    asking = set(order.asking)
    for name in merged:
        if results[name].body.scale_up_requested_at is not None:
            asking.add(name)
        else:
            asking.discard(name)
    return {n for n in asking if n in key_of}


class _Changes(NamedTuple):
    """What a pass must redo, from what changed since the last one."""

    changed: set[str]  # the names whose version is new or differs (or given as changed)
    deleted: set[str]  # the tasks whose spec is gone
    redo: set[str]  # the tasks to reconcile again (or whose result to merge again)
    heap: list[Expiry]  # the kept heap, its expired items popped


def _changes(
    ctx: FastPassContext,
    order: Order,
    previous: Mapping[str, Kept],
    specs: Mapping[str, TaskInput],
    versions: Mapping[str, Hashable],
    names: list[str],
    given: Collection[str] | None,
) -> _Changes:
    """What changed, at C speed: versions, names; what expired, from the heap; the runs whose
    job changed; and every loud task."""
    changed = set(given) if given is not None else changed_names(versions, order.versions)
    if names == order.names:  # the same tasks as last time (compared at C speed)
        deleted: set[str] = set()
    else:
        deleted = order.statuses.keys() - specs.keys()
    if names != list(versions):
        changed |= specs.keys() - versions.keys()
    heap = list(order.heap)
    redo = set(changed)
    while heap and heap[0].valid_until < ctx.now:
        item = heappop(heap)
        if _current(item, order.loud, previous):
            redo.add(item.name)
    jobs = ctx.obs.jobs or {}
    if jobs is not order.jobs:
        for sid in jobs.keys() | order.jobs.keys():
            if sid in order.watch and jobs.get(sid) != order.jobs.get(sid):
                redo.add(order.watch[sid])
    redo |= order.loud
    redo -= deleted
    redo &= specs.keys()
    return _Changes(changed, deleted, redo, heap)


def _claims_judged(
    ctx: FastPassContext,
    order: Order,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    changes: _Changes,
    orphans: set[str],
) -> KeptClaims:
    """The explicit id claims of this pass, each claimant of an id whose claimants, runs or
    jobs changed added to `changes.redo` (its claim judged again): those of the tasks whose
    version changed or whose spec went, and of every sidecar without a spec (now or last
    pass: no version tells when one changes)."""
    names = changes.changed | changes.deleted | orphans | order.orphans
    claims, claimants = keptclaims.claims_after(
        order.claims, specs, statuses, ctx.env.ours, names, ctx.inputs.folders
    )
    changes.redo.update(claimants)
    return claims


def _reconcile_redone(
    ctx: FastPassContext,
    gates: Gates,
    changes: _Changes,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    versions: Mapping[str, Hashable],
    previous: Mapping[str, Kept],
    kept: dict[str, Kept],
    carried: Collection[str],
    claims: KeptClaims,
) -> tuple[dict[str, TaskResult], Gates] | None:
    """Each task `changes` redoes reconciled (or its result reused), with the gated tasks whose
    dependencies moved (keptgates.gate_again), each gated one's result after the gates; all
    merged into `ctx`, in name order as in plan(); and the gates the next pass keeps. None if
    one of them needs the full pass (then nothing is merged). A task whose explicit id claim
    is refused (`claims.refused`) is planned with its spec turned Invalid, as in
    planner.with_id_claims, its result never reused: it is not what its version describes;
    the gates read that spec too, as the full pass's do."""
    results: dict[str, TaskResult] = {}
    if claims.refused:
        refused = {n: refused_claim(specs[n], why) for n, why in claims.refused.items()}
        specs = {**specs, **refused}  # only while some claim is refused

    def again(name: str) -> TaskResult:
        version = None if name in claims.refused else versions.get(name)
        results[name] = reconcile(
            ctx, name, specs[name], statuses.get(name), version, previous, kept
        )
        return results[name]

    redo = sorted(changes.redo)
    for name in redo:
        again(name)
    gates, through = keptgates.gate_again(
        ctx.now,
        gates,
        specs,
        lambda n: kept[n].result,
        redo,
        changes.deleted,
        carried,
        again,
        ctx.options.visibility,
    )
    if keptgates.names_an_array(gates):
        return None
    results.update(through)
    for name in sorted(results):
        ctx.add(name, results[name])
    return results, gates


@dataclass(frozen=True)
class _TaskResults:
    """Each task's result in this pass (redone, or kept from the last), and how admission
    reads a task it looks at."""

    ctx: FastPassContext
    statuses: Mapping[str, TaskStatus]
    results: Mapping[str, TaskResult]  # the redone ones
    kept: Mapping[str, Kept]
    gated: Mapping[str, TaskResult]  # the gated waiting tasks' results after the gates

    def result_of(self, name: str) -> TaskResult:
        found = self.results.get(name)
        return found if found is not None else self.kept_result(name)

    def kept_result(self, name: str) -> TaskResult:
        """A task not redone: its result (after the gates) as the last pass left it."""
        found = self.gated.get(name)
        return found if found is not None else self.kept[name].result

    def adopt(self, name: str) -> None:
        """A quiet task admission looks at: its body and request, as merge() would give."""
        if name in self.results:
            return
        result = self.kept_result(name)
        ctx = self.ctx
        ctx.bodies[name] = result.body
        if result.conds:
            ctx.conds[name] = dict(result.conds)
        assert result.waiter is not None
        ctx.tasks[name] = result.waiter.task

    def as_given(self, name: str) -> TaskStatusBody | None:
        return None if name in self.results else self.statuses[name].status

    def unchanged(self, name: str, reason: Reason, bucket: str) -> bool:
        """Whether a task not redone already waits far, in `bucket`, for `reason`."""
        if name in self.results:
            return False
        body = self.statuses[name].status
        return (
            body.queue_position is None
            and body.queue_position_bucket == bucket
            and body.reason == reason
            and body.scale_up_requested_at is None
        )


@dataclass
class _Reordered:
    """The kept order, moved by the tasks whose entry changed."""

    keys: dict[str, list[Entry]]  # a queue's list copied when it moves
    key_of: Mapping[str, Entry]  # the last pass's map, copied only when an entry moves
    moves: dict[str, int]  # by queue: how many entries left or joined it
    unfit: set[str]  # the waiting tasks too big for their queue
    arrivals: Mapping[str, list[Arrival]]
    news: dict[str, Entry | None]  # the tasks whose entry changed: their new one
    flipped: set[str]  # those that crossed their queue's maxQueued, their key the same
    # The arrays' caps (arraycaps.recap): by array; by element held back, why; the elements
    # whose wait for their cap began, ended or changed.
    arrays: Mapping[str, ArrayCap] = field(default_factory=dict)
    capped: Mapping[str, Waiting] = field(default_factory=dict)
    recapped: set[str] = field(default_factory=set)


def _reorder(
    ctx: FastPassContext,
    order: Order,
    merged: list[str],
    deleted: set[str],
    results: Mapping[str, TaskResult],
    kept: Mapping[str, Kept],
) -> _Reordered:
    """The order, moved by the tasks whose entry changed (most passes move none: a status)."""
    keys = dict(order.keys)
    key_of: Mapping[str, Entry] = order.key_of
    writable: dict[str, Entry] | None = None
    copied: set[str] = set()
    moves: dict[str, int] = {}
    ceilings = order.ceilings
    unfit = set(order.unfit)
    news, arrivals, flipped = _moved(ctx, order, [*merged, *deleted], results)
    for name, new in news.items():
        old = key_of.get(name)
        if old == new:
            continue
        queue = queue_of_task(ctx, name)
        if queue not in copied:
            keys[queue] = list(keys.get(queue, ()))
            copied.add(queue)
        entries = keys[queue]
        if writable is None:
            key_of = writable = dict(order.key_of)
        if old is not None:
            del entries[bisect_left(entries, old)]
            del writable[name]
            moves[queue] = moves.get(queue, 0) + 1
        unfit.discard(name)
        if new is not None:
            if (
                ceilings is not None
                and not new.past_limit
                and fairshare.never_fits(
                    candidate_of(results.get(name) or kept[name].result), ceilings[queue]
                )
            ):
                unfit.add(name)
            insort(entries, new)
            writable[name] = new
            moves[queue] = moves.get(queue, 0) + 1
    for queue in copied:
        if not keys[queue]:
            del keys[queue]
    if ceilings is not None:
        _judge_fit_again(ctx, merged, key_of, news, ceilings, unfit, results, kept)
    return _Reordered(keys, key_of, moves, unfit, arrivals, news, flipped)


def _judge_fit_again(
    ctx: FastPassContext,
    merged: list[str],
    key_of: Mapping[str, Entry],
    news: Mapping[str, Entry | None],
    ceilings: Mapping[str, fairshare.Ceiling],
    unfit: set[str],
    results: Mapping[str, TaskResult],
    kept: Mapping[str, Kept],
) -> None:
    """A redone task whose entry stayed may ask for more (or less) than before: whether it can
    ever fit its queue is judged again, in `unfit` (an edit of its resources or of
    preemptible moves no entry)."""
    for name in merged:
        entry = key_of.get(name)
        if entry is None or name in news:
            continue
        candidate = candidate_of(results.get(name) or kept[name].result)
        if not entry.past_limit and fairshare.never_fits(
            candidate, ceilings[queue_of_task(ctx, name)]
        ):
            unfit.add(name)
        else:
            unfit.discard(name)


@dataclass
class _Fronts:
    """Admission over each queue's front: how far each front reaches in its entries, where
    each walk ended, and the tasks whose status the pass set anew so far."""

    fronts: dict[str, int]
    counted: dict[str, int]  # by queue: its entries that count (not past its maxQueued)
    walks: Walks
    touched: set[str]
    fair: QueueAdmission | None = None  # team queues: their admission
    # Team queues: this pass's wait and message of each task at an exact place, and what
    # each queue's exact places past its walk were computed from.
    spoken: dict[str, Worded] = field(default_factory=dict)
    places: dict[str, ExactPlaces] = field(default_factory=dict)
    front_walk: FrontWalk | None = None  # one queue: the policy's walk over its front
    reused: bool = False  # whether that walk is the last pass's


def _first_fronts(ctx: FastPassContext, keys: Mapping[str, list[Entry]]) -> _Fronts:
    """The front of each queue, long enough that the policy's walk most often ends in it: the
    exact places and the tasks that may start, where strict's walk ends (at its first misfit),
    and most often backfill's and besteffort's too (a full cluster whose jobs declare no end:
    no reservation, everyone behind the front)."""
    options = ctx.options
    first = options.exact_queue_positions + options.max_inflight + 2
    if options.policy != "strict":  # may test backfill_candidates past the first misfit
        first += options.backfill_candidates
    if ctx.queues is not None:
        # Each queue's walk most often ends a few tasks in (a full cluster, 1 task behind its
        # blocked front): start small, give more to a queue whose answer needs it.
        first = _TEAM_FRONT
    # A queue's tasks past its maxQueued are not candidates: its front is of the counted ones.
    counted = {queue: counted_entries(entries) for queue, entries in keys.items()}
    fronts = {queue: min(counted[queue], first) for queue in keys}
    return _Fronts(fronts, counted, {}, set())


def _requests(
    ctx: FastPassContext,
    order: Order,
    previous: Mapping[str, Kept],
    names: Iterable[str],
    tasks: _TaskResults,
    key_of: Mapping[str, Entry],
) -> Mapping[Capacity, int]:
    """How many waiting tasks ask for each request (Order.requests), moved by `names` (the
    redone and deleted tasks: only theirs can change)."""
    if ctx.obs.scaling is None:
        return {}
    requests: dict[Capacity, int] | None = None
    for name in names:
        old = candidate_of(previous[name].result).request if name in order.key_of else None
        new = candidate_of(tasks.result_of(name)).request if name in key_of else None
        if old == new:
            continue
        if requests is None:
            requests = dict(order.requests)
        if old is not None:
            requests[old] -= 1
            if not requests[old]:
                del requests[old]
        if new is not None:
            requests[new] = requests.get(new, 0) + 1
    return order.requests if requests is None else requests


def _admit_one_queue(
    ctx: FastPassContext,
    order: Order,
    moved: _Reordered,
    tasks: _TaskResults,
    merged: list[str],
    asking: Collection[str],
    requests: Mapping[Capacity, int],
) -> _Fronts:
    """The policy's walk over the one queue's front, and admission's statuses for it; on an
    autoscaling cluster, with the demand for nodes (keptorder's docstring: a front that holds
    every task of `asking`; `requests`: Order.requests)."""
    found = _first_fronts(ctx, moved.keys)
    fronts = found.fronts
    options = ctx.options
    narrow = options.exact_queue_positions + options.max_inflight + 2
    wide = narrow if options.policy == "strict" else narrow + options.backfill_candidates
    entries = moved.keys.get("", [])
    last_front = order.front_walk
    if "" in fronts and (last_front is None or len(last_front.candidates) <= narrow):
        # The narrow front first, unless the last walk needed more: a walk that ends in it
        # (Admission.tail) gives the answer the wide one would, for fewer candidates.
        fronts[""] = min(fronts[""], narrow)
    capped = moved.capped
    if asking:
        last_asking = max(bisect_left(entries, moved.key_of[n]) for n in asking)
        fronts[""] = max(fronts[""], last_asking + 1)
    while True:
        front = entries[: fronts.get("", 0)]
        placed: tuple[str, ...] = ()
        held: dict[str, Waiting] = {}
        if capped:
            placed = tuple(entry_names(front))
            held = {n: capped[n] for n in placed if n in capped}
            placed = placed if held else ()
        candidates = [candidate_of(tasks.result_of(e.name)) for e in front if e.name not in held]
        front_walk, reused = frontadmission.walk_front(ctx, candidates, last_front, placed, held)
        walked = front_walk.admission
        scaled, start = _scale_front(
            ctx, entries, len(front), candidates, walked, tasks, requests, capped
        )
        if start is not None:
            fronts[""] = start + 1
            continue
        ended = walked.tail is not None and (scaled is None or scaled.scale.walk_ended)
        if ended or not _open_past(ctx, moved, "", fronts.get("", 0)):
            break
        fronts[""] = min(len(entries), max(wide, fronts[""] * 4))
    gave = order.statuses
    # The same walk of the same prefix as last pass: its places and waits are those last
    # pass gave. A new walk (a job listed PENDING: the start's claim is the Starting task's
    # now) most often gives the same ones too, the started tasks gone from its front:
    # compared task by task. Either way a task that kept its status keeps it.
    exact = options.exact_queue_positions
    gave_at = (
        None if reused or last_front is None else frontadmission.last_places(last_front, exact)
    )

    def stands(name: str, place: int, waiting: Waiting) -> bool:
        if gave_at is not None:
            last = gave_at.get(name)
            if last is None or last.place != place or last.waiting != waiting:
                return False
        given = tasks.statuses.get(name)
        # (a preemptor's wait is not the walk's: placed again)
        return (
            name not in tasks.results
            and given is gave.get(name)
            and given is not None
            and given.status.reason is not Reason.PREEMPTING
        )

    stand = stands if reused or gave_at else None
    if scaled is not None:  # the waits the demand for nodes gives are not the walk's
        walked, stand = scaled.admission, None
    scale = scaled.scale if scaled is not None else None
    preempting = frontpreemption.preempt_fronts(ctx, candidates, walked, tasks.result_of)
    walk = admit_prefix(
        ctx,
        candidates,
        walked,
        tasks.unchanged,
        tasks.adopt,
        stand,
        held,
        front_walk.placed,
        scale,
        preempting,
    )
    ctx.walk = walk_end(walk.admission)
    end = fronts.get("", 0)
    if ctx.walk.tail_at is not None and held:
        at = walk_index(front_walk.placed, held, ctx.walk.tail_at, end)
        ctx.walk = ctx.walk._replace(tail_at=at)
    elif ctx.walk.tail_at is None and end < len(entries):
        ctx.walk = ctx.walk._replace(tail_at=end)  # past it, only elements capped
    found.walks = {"": ctx.walk}
    found.touched = set(merged) | set(walk.touched)
    found.front_walk, found.reused = front_walk, reused
    return found


def _scale_front(
    ctx: FastPassContext,
    entries: list[Entry],
    front: int,
    candidates: list[Candidate],
    walked: Admission,
    tasks: _TaskResults,
    requests: Mapping[Capacity, int],
    capped: Mapping[str, Waiting],
) -> tuple[frontadmission.ScaledFront | None, int | None]:
    """On an autoscaling cluster, the demand for nodes over the front `candidates` (the
    first `front` entries, less the elements `capped` by their array: no candidates)
    (frontadmission.scale_front), and the index in `entries` of the first task past the front
    that starts on what it leaves (ScaledFront.behind_holder), None if none does: looked for
    one by one only when some waiting task's request (`requests`, Order.requests) would
    start. (None, None) on a fixed cluster."""
    if ctx.obs.scaling is None:
        return None, None
    bodies = {c.name: tasks.result_of(c.name).body for c in candidates}
    scaled = frontadmission.scale_front(ctx, candidates, walked, bodies)
    left_over = scaled.behind_holder()
    free = scaled.free
    if left_over is None or not any(left_over.starts("", r, free) for r in requests):
        return scaled, None
    for index in range(front, len(entries)):
        name = entries[index].name
        if name in capped:
            continue
        if left_over.starts("", candidate_of(tasks.result_of(name)).request, free):
            return scaled, index
    return scaled, None


def _admit_team_queues(
    ctx: FastPassContext, order: Order, moved: _Reordered, tasks: _TaskResults, merged: list[str]
) -> _Fronts:
    """Fair admission over each team queue's front, the exact places past each walk, and
    admission's statuses for them."""
    found = _first_fronts(ctx, moved.keys)
    fair, prefix = _walk_team_fronts(ctx, moved, tasks, found)
    standing: dict[str, list[str]] = {}
    extra = _exact_places(ctx, order, moved, tasks, found, standing)
    candidates = [candidate_of(tasks.result_of(e.name)) for e in prefix]
    if extra:
        prefix = sorted(prefix + extra)
        candidates = [candidate_of(tasks.result_of(e.name)) for e in prefix]
    capped = moved.capped
    if capped:
        for queue, entries in moved.keys.items():
            for name in entry_names(entries[: found.fronts[queue]]):
                if name in capped:  # no candidate: its queue, as plan() finds it
                    fair.queue_of[name] = queue
    preempting = frontpreemption.preempt_fronts(ctx, candidates, fair, tasks.result_of)
    admitted = frontadmission.admit_queue_prefix(
        ctx,
        candidates,
        fair,
        tasks.as_given,
        tasks.adopt,
        order.words,
        found.spoken,
        capped,
        preempting,
    )
    found.touched = set(merged) | set(admitted)
    for queue, same in standing.items():
        ctx.order.setdefault(queue, []).extend(same)
    return found


def _walk_team_fronts(
    ctx: FastPassContext, moved: _Reordered, tasks: _TaskResults, found: _Fronts
) -> tuple[QueueAdmission, list[Entry]]:
    """Fair admission over the queues' fronts, each front grown (in `found`) until its walk
    ends in it; with the entries it was given. Sets `found.fair` and `found.walks`."""
    keys, key_of, unfit, capped = moved.keys, moved.key_of, moved.unfit, moved.capped
    fronts, counted = found.fronts, found.counted
    while True:
        prefix = sorted(e for queue, entries in keys.items() for e in entries[: fronts[queue]])
        # (The elements capped by their array are no candidates: placed after the walk.)
        candidates = [candidate_of(tasks.result_of(e.name)) for e in prefix if e.name not in capped]
        cut = {q for q, n in fronts.items() if _open_past(ctx, moved, q, n)}
        # Those too big for their queue past the fronts: admission takes them out first.
        beyond = [
            candidate_of(tasks.result_of(n))
            for n in sorted(unfit)
            if n not in capped
            and bisect_left(keys[q := queue_of_task(ctx, n)], key_of[n]) >= fronts[q]
        ]
        fair = frontadmission.walk_queues(ctx, candidates + beyond, cut)
        walks = walk_ends(fair, keys, frozenset(unfit), capped)
        # Short: its walk did not end in its front (or its answer may read past it).
        short = [q for q in cut if q in fair.short or walks[q].tail_at is None]
        for queue, tests in fair.unread.items():
            if queue not in short and _own_past(
                tests, keys[queue], fronts[queue], unfit, capped, tasks.result_of
            ):
                short.append(queue)
        if not short:
            for queue, n in fronts.items():
                if queue not in cut and n < counted[queue] and walks[queue].tail_at is None:
                    walks[queue] = walks[queue]._replace(tail_at=n)  # past it, only capped
            found.fair, found.walks = fair, walks
            return fair, prefix
        for queue in short:
            fronts[queue] = min(counted[queue], fronts[queue] * 4)


def _exact_places(
    ctx: FastPassContext,
    order: Order,
    moved: _Reordered,
    tasks: _TaskResults,
    found: _Fronts,
    standing: dict[str, list[str]],
) -> list[Entry]:
    """The exact places past each walk's end: each waits for the queue's tail lack, `ahead`
    counting the tasks its walk kept (as the policy numbers them past its tail). Returns the
    entries to hand admission with the fronts (their waits set in `found.fair`); a queue
    whose places, waits and statuses are last pass's goes to `standing` instead. Each front
    in `found` grows to its places' end."""
    fair = found.fair
    assert fair is not None
    exact = ctx.options.exact_queue_positions
    unfit, capped = moved.unfit, moved.capped
    extra: list[Entry] = []
    begun = set(fair.start)
    for queue, entries in moved.keys.items():
        front, walk = found.fronts[queue], found.walks[queue]
        end = min(len(entries), exact + walk.started)
        if end <= front:
            continue
        ahead = sum(
            1
            for e in entries[:front]
            if e.name not in begun and e.name not in unfit and e.name not in capped
        )
        found.places[queue] = placed = ExactPlaces(front, end, walk.lack, ahead, walk.started)
        if (
            order.places.get(queue) == placed
            and entries is order.keys.get(queue)
            and moved.recapped.isdisjoint(entry_names(entries[front:end]))
        ):
            same = _standing(
                entries[front:end], tasks.results, tasks.statuses, order, unfit, found.spoken
            )
            if same is not None:
                # The same places, waits and statuses as last pass: handed back as they
                # are (their order and the count NotConsidered kept as admission would).
                standing[queue] = same
                if isinstance(walk.lack, NotConsidered):
                    ctx.not_considered += sum(
                        1 for e in entries[front:end] if not e.past_limit and e.name not in capped
                    )
                found.fronts[queue] = end
                continue
        for e in entries[front:end]:
            fair.queue_of[e.name] = queue
            if e.past_limit:
                fair.waiting[e.name] = _queue_full(order.bounds, queue)
            elif e.name in capped:
                continue  # (admit_queue_prefix gives it its cap's wait)
            elif e.name not in unfit:
                assert walk.lack is not None  # counted tasks past a queue's front: a tail
                fair.waiting[e.name] = Waiting(walk.lack, ahead, queue)
                ahead += 1
        extra.extend(entries[front:end])
        found.fronts[queue] = end
    return extra


def _wait_past_fronts(
    ctx: FastPassContext, order: Order, moved: _Reordered, found: _Fronts
) -> bool:
    """Past each front, every task waits for its queue's tail lack: each queue's waiting
    names in order, and the tasks admission did not consider. False: a queue's tail waits for
    another reason than last pass's, which needs the full pass."""
    for queue, entries in moved.keys.items():
        front = found.fronts[queue]
        if front == len(entries):
            continue
        walk = found.walks[queue]
        last = order.waiting.get(queue)
        if (
            entries is order.keys.get(queue)
            and last
            and not (walk.started or order.started.get(queue))
        ):
            # The same keys and no start, this pass or last: the same names waiting in order.
            ctx.order[queue] = last
        else:
            ctx.order.setdefault(queue, []).extend(entry_names(entries[front:]))
        counted = found.counted[queue]
        if front >= counted:
            continue  # past maxQueued, all of them: QueueFull, as their statuses say
        if walk.lack is None and not _open_past(ctx, moved, queue, front):
            continue  # elements capped by their arrays, each waiting so
        lack = walk.lack
        assert lack is not None and walk.tail_at is not None
        before = order.tail.get(queue)
        if before is not None and before is not lack.reason:
            return False
        if isinstance(lack, NotConsidered):
            capped = moved.capped
            ctx.not_considered += counted - front - _capped_past(ctx, moved, queue, front)
            ctx.not_considered -= sum(
                1
                for n in moved.unfit
                if n not in capped
                and queue_of_task(ctx, n) == queue
                and bisect_left(entries, moved.key_of[n]) >= front
            )
    return True


def _open_past(ctx: FastPassContext, moved: _Reordered, queue: str, front: int) -> bool:
    """Whether a task past the queue's front is a candidate of its walk: it counts (not past
    maxQueued) and is not capped by its array. (Without caps: whether one counts.)"""
    entries = moved.keys.get(queue, [])
    past = counted_entries(entries) - front
    if past <= 0 or not moved.capped:
        return past > 0
    capped = moved.capped
    past -= _capped_past(ctx, moved, queue, front)
    past -= sum(
        1
        for n in moved.unfit
        if n not in capped
        and queue_of_task(ctx, n) == queue
        and bisect_left(entries, moved.key_of[n]) >= front
    )
    return past > 0


def _capped_past(ctx: FastPassContext, moved: _Reordered, queue: str, front: int) -> int:
    """How many of the queue's tasks past its front wait for their array's maxParallel."""
    if not moved.capped:
        return 0
    total = sum(
        len(cap.entries) - cap.open
        for cap in moved.arrays.values()
        if queue_of_task(ctx, cap.entries[0].name) == queue
    )
    return total - sum(1 for n in entry_names(moved.keys[queue][:front]) if n in moved.capped)


def _far_names(
    ctx: FastPassContext, order: Order, moved: _Reordered, found: _Fronts, merged: list[str]
) -> set[str]:
    """The waiting tasks past the fronts whose place may have changed: those that moved, were
    walked last time, or sit near a bucket edge."""
    key_of, keys, fronts = moved.key_of, moved.keys, found.fronts
    exact = ctx.options.exact_queue_positions
    far: set[str] = set(order.walked)
    far.update(n for n in merged if n in key_of)
    far.update(moved.flipped)
    far.update(moved.recapped)
    # Those that waited as a preemptor or a victim: their wait is admission's again.
    far.update(n for n in order.preempted if n in key_of)
    for queue in keys.keys() | order.keys.keys():
        started = found.walks.get(queue, NO_WALK).started
        was = order.started.get(queue, 0)
        shift = moved.moves.get(queue, 0) + abs(started - was)
        far.update(_near_edges(keys.get(queue, []), fronts.get(queue, 0), started, shift, exact))
        far.update(
            n for n in _near_edges(order.keys.get(queue, []), 0, was, shift, exact) if n in key_of
        )
    # Those in a front were placed by admission.
    far.difference_update(*(entry_names(entries[: fronts[q]]) for q, entries in keys.items()))
    return far


def _place_far(
    ctx: FastPassContext,
    order: Order,
    moved: _Reordered,
    found: _Fronts,
    tasks: _TaskResults,
    far: Iterable[str],
) -> None:
    """Each of `far` past its queue's front at its place, waiting for the queue's tail lack
    (or QueueFull, or OverQuota), unless its status already says so."""
    exact = ctx.options.exact_queue_positions
    label = ctx.queues is not None
    for name in far:
        entry = moved.key_of.get(name)
        if entry is None:
            continue
        queue = queue_of_task(ctx, name)
        position = bisect_left(moved.keys[queue], entry)
        if position < found.fronts[queue]:
            continue
        walk = found.walks[queue]
        tasks.adopt(name)
        place = position - walk.started + 1
        if entry.past_limit:
            waiting = _queue_full(order.bounds, queue)
        elif name in moved.capped:  # held back by its array's maxParallel
            waiting = moved.capped[name]
        elif name in moved.unfit and found.fair is not None:  # too big for its queue: OverQuota
            waiting = found.fair.waiting[name]
        else:
            assert walk.lack is not None
            waiting = Waiting(walk.lack, position - walk.started, queue if label else None)
        if not tasks.unchanged(name, waiting.reason, position_bucket(place, exact)):
            place_far(ctx, name, waiting, place, queue if label else None)
            found.touched.add(name)


def _collect(
    ctx: FastPassContext,
    order: Order,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    merged: list[str],
    deleted: set[str],
    orphans: set[str],
    found: _Fronts,
) -> tuple[Plan, dict[str, TaskStatus], PhaseCounts]:
    """The clean-up stages, the statuses of the touched tasks, and the plan; with every
    status it gives and its phase counts."""
    touched = found.touched
    ctx.expire_finished_jobs(_awaited(statuses, merged, orphans))
    if orphans:
        ctx.orphan_sidecars(specs, _in_order_of(statuses, orphans))
    ctx.collect_statuses(statuses, sorted(touched))
    out = dict(statuses)
    for name in orphans:
        del out[name]
    out.update(ctx.statuses)
    counts = _counts_after(order, out, touched | deleted)
    summary = Summary(
        capacity=ctx.obs.capacity,
        used=ctx.used,
        queued=counts.queued,
        starting=counts.starting,
        running=counts.running,
        queues=found.fair.summary() if found.fair is not None else None,
        order=ctx.order,
        not_considered=ctx.not_considered,
    )
    return ctx.freeze(statuses, out, summary, touched), out, counts


def _counts_after(
    order: Order, out: Mapping[str, TaskStatus], changed: Iterable[str]
) -> PhaseCounts:
    """The last plan's phase counts, moved by the statuses of `changed`."""
    queued, starting, running = order.counts.queued, order.counts.starting, order.counts.running
    for name in changed:
        for status, sign in ((order.statuses.get(name), -1), (out.get(name), 1)):
            if status is None:
                continue
            phase = status.status.phase
            queued += sign * (phase is Phase.QUEUED)
            starting += sign * (phase is Phase.STARTING)
            running += sign * (phase is Phase.RUNNING)
    return PhaseCounts(queued, starting, running)


def _quiet_after(
    order: Order,
    statuses: Mapping[str, TaskStatus],
    out: Mapping[str, TaskStatus],
    tasks: _TaskResults,
    heap: list[Expiry],
    redone: Iterable[str],
    deleted: Collection[str],
) -> tuple[frozenset[str], dict[str, str]]:
    """The loud tasks and the watched submission ids the next pass keeps, `redone` (every
    task this pass touched, deleted or merged) judged anew; the quiet ones' ends pushed on
    `heap`."""
    loud = set(order.loud)
    watch = dict(order.watch)
    for name in redone:
        was_quiet = name in order.statuses and name not in order.loud
        loud.discard(name)
        if was_quiet:
            gone = statuses[name].status.submission_id if name in statuses else None
            if gone is not None and watch.get(gone) == name:
                del watch[gone]
        if name in deleted:
            continue
        result = tasks.result_of(name) if name in tasks.kept else None
        if result is not None and is_quiet(result, statuses.get(name), out.get(name)):
            named = statuses[name].status.submission_id
            if named is not None:
                watch[named] = name
            if (not was_quiet or name in tasks.results) and result.valid_until < math.inf:
                heappush(heap, Expiry(result.valid_until, name))
        else:
            loud.add(name)
    return frozenset(loud), watch


def _marked_after(
    order: Order,
    out: Mapping[str, TaskStatus],
    tasks: _TaskResults,
    redone: Collection[str],
    deleted: Collection[str],
) -> frozenset[str]:
    """The tasks the next pass keeps as bearing a preemption (frontpreemption.marked):
    the last pass's, `redone` (every task this pass touched, deleted or merged) judged anew."""
    marked = set(order.preempted)
    for name in redone:
        marked.discard(name)
        if name in deleted:
            continue
        result = tasks.result_of(name) if name in tasks.kept else None
        if frontpreemption.marked(result, out.get(name)):
            marked.add(name)
    return frozenset(marked)


def _own_past(
    tests: list[OwnTest],
    entries: list[Entry],
    front: int,
    unfit: Collection[str],
    capped: Collection[str],
    result_of: Callable[[str], TaskResult],
) -> bool:
    """Whether the least-served queue's own walk (`fairshare._own_first`), which found
    nothing in the front it was given, would start a task past it: its counted tasks past
    `front` (those too big for it left out, as admission drops them, and those capped by
    their array: no candidates), each read by the tests whose walk reaches that far. With the
    cluster full none fits, and the front given stands."""
    bounds = [t.more for t in tests]
    most = None if None in bounds else max(b for b in bounds if b is not None)
    # Enough entries for `most` candidates: the unfit ones are skipped, as are those past
    # maxQueued or capped (no candidates)
    skipped = len(unfit) + len(capped)
    past = entries[front:] if most is None else entries[front : front + most + skipped]
    candidates = [
        candidate_of(result_of(e.name))
        for e in past
        if not e.past_limit and e.name not in unfit and e.name not in capped
    ]
    return any(test.lets_start(c) for test in tests for c in candidates[: test.more])


def _standing(
    entries: list[Entry],
    results: Mapping[str, TaskResult],
    statuses: Mapping[str, TaskStatus],
    order: Order,
    unfit: Collection[str],
    spoken: dict[str, Worded],
) -> list[str] | None:
    """The names of a queue's exact places past its walk whose places and waits are those of
    last pass (the caller checks that), when each still has the status last pass gave it and
    was not redone: `admit_queue_prefix` would leave each as it is. None: place them again."""
    names = list(entry_names(entries))
    last, words = order.statuses, order.words
    for name in names:
        if name in results or name in unfit or statuses.get(name) is not last.get(name):
            return None
        if name not in words:
            return None
    spoken.update((name, words[name]) for name in names)
    return names


def _same_key(old: Entry | None, new: Entry | None) -> bool:
    """Whether two entries (or none) hold the same task at the same key, whatever their
    maxQueued flag."""
    if old is None or new is None:
        return old is new
    return (
        old.rank == new.rank
        and old.queued_at == new.queued_at
        and old.name_order == new.name_order
        and old.name == new.name
    )


def _moved(
    ctx: FastPassContext, order: Order, names: list[str], results: Mapping[str, TaskResult]
) -> tuple[dict[str, Entry | None], Mapping[str, list[Arrival]], set[str]]:
    """The new entries of the tasks whose key changed, and of those that crossed their queue's
    maxQueued because of it (`flipped`: their key did not change); the arrivals after them."""
    key_of, bounds = order.key_of, order.bounds
    news: dict[str, Entry | None] = {}
    arrivals = dict(order.arrivals)
    changes: dict[str, int] = {}
    for name in names:
        old, new = key_of.get(name), entry_of(name, results.get(name))
        if _same_key(old, new):
            continue  # (its maxQueued flag is judged below)
        news[name] = new
        bound = bounds.get(queue_of_task(ctx, name))
        if bound is None:
            continue
        group = bound.queue
        if group not in changes:
            arrivals[group] = list(arrivals.get(group, ()))
        changes[group] = changes.get(group, 0) + 1
        arrived = arrivals[group]
        if old is not None:
            del arrived[bisect_left(arrived, Arrival(old.queued_at, name))]
        if new is not None:
            insort(arrived, Arrival(new.queued_at, name))
    flipped: set[str] = set()
    if not changes:
        return news, arrivals, flipped
    for name, new in news.items():
        bound = bounds.get(queue_of_task(ctx, name))
        if new is not None and bound is not None:
            index = bisect_left(arrivals[bound.queue], Arrival(new.queued_at, name))
            news[name] = new._replace(past_limit=int(index >= bound.limit))
    flipped = _crossed_limits(order, arrivals, changes, news)
    return news, arrivals, flipped


def _crossed_limits(
    order: Order,
    arrivals: Mapping[str, list[Arrival]],
    changes: Mapping[str, int],
    news: dict[str, Entry | None],
) -> set[str]:
    """The tasks whose key stayed but that crossed their queue's maxQueued as others arrived
    or left (`changes` of them by limited queue): their new entries, in `news`. Each change
    moves a task's index by one at most: only those within that many of the limit can cross
    it."""
    key_of = order.key_of
    limits = dict(order.bounds.values())
    flipped: set[str] = set()
    for group, count in changes.items():
        limit = limits[group]
        low, high = max(limit - count, 0), limit + count
        before, after = order.arrivals.get(group, []), arrivals[group]
        for arrival in [*before[low:high], *after[low:high]]:
            name = arrival.name
            if name in news or name not in key_of:
                continue
            entry = key_of[name]
            full = int(bisect_left(after, Arrival(entry.queued_at, name)) >= limit)
            if full != entry.past_limit:
                news[name] = entry._replace(past_limit=full)
                flipped.add(name)
    return flipped


def _queue_full(bounds: Mapping[str, Bound], queue: str) -> Waiting:
    """A task of `queue` past its maxQueued, as dispatch.queue_full words it."""
    bound = bounds[queue]
    return Waiting(QueueFull(bound.queue, bound.limit), queue=queue)


def _current(item: Expiry, loud: frozenset[str], kept: Mapping[str, Kept]) -> bool:
    """Whether a heap item is the quiet task's result's end still."""
    entry = kept.get(item.name)
    return (
        item.name not in loud and entry is not None and entry.result.valid_until == item.valid_until
    )


def _near_edges(
    keys: list[Entry], front: int, started: int, shift: int, exact: int
) -> Iterable[str]:
    """The tasks whose place (position - started + 1) lies within `shift` of a bucket edge
    (exact, 10 exact, ...): only those can change bucket when places move by `shift`."""
    edge = exact
    while edge - shift <= len(keys):
        low = max(front, edge - shift - 1 + started)
        high = min(len(keys), edge + shift + 1 + started)
        yield from entry_names(keys[low:high])
        edge *= 10


def _awaited(
    statuses: Mapping[str, TaskStatus], merged: list[str], orphans: set[str]
) -> Mapping[str, TaskStatus]:
    """The statuses that may name an active run: a quiet task's never does."""
    names = [n for n in merged if n in statuses]
    names += orphans
    return {n: statuses[n] for n in names}


def _in_order_of(statuses: Mapping[str, TaskStatus], names: set[str]) -> dict[str, TaskStatus]:
    if len(names) == 1:
        (name,) = names
        return {name: statuses[name]}
    return {n: s for n, s in statuses.items() if n in names}


def _orphans(
    statuses: Mapping[str, TaskStatus],
    specs: Mapping[str, TaskInput],
    maybe: Collection[str] | None,
) -> set[str]:
    """The sidecars without a spec. A new one is a spec deleted or a sidecar read anew: when
    the caller named those, only they and the last pass's orphans (`maybe` holds them all)
    can be one. Else (None), as after a full read of the sidecars, every name is looked at,
    the key views first compared in place (most passes have none)."""
    if maybe is not None:
        return {n for n in maybe if n in statuses and n not in specs}
    return set() if statuses.keys() == specs.keys() else statuses.keys() - specs.keys()
