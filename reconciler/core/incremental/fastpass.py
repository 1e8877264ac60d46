"""The incremental planner's fast pass over the queues' kept order (core/incremental/keptorder.py
holds
the order, the per-task memo and the full pass's hand-over): a pass redoes only the tasks
whose inputs changed, the loud ones, the walked head of each queue and the few near a
position-bucket edge; every other status is handed back as it was. Where it holds, and why it
equals `planner.plan`, is queueorder's docstring."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from heapq import heappop, heappush

from reconciler.core import cleanup, planner
from reconciler.core.admission import admit as admission
from reconciler.core.admission.waits import NotConsidered, QueueFull, Waiting
from reconciler.core.decisions import Summary
from reconciler.core.incremental import frontadmission as headadmission
from reconciler.core.incremental.frontadmission import admit_prefix, place_far
from reconciler.core.incremental.keptorder import (
    ENTRY_NAME,
    Arrival,
    Entry,
    Kept,
    Order,
    Places,
    Walks,
    build_order,
    candidate_of,
    changed_names,
    counted_entries,
    entry_of,
    flagged_task,
    is_quiet,
    orphans_of,
    owner_of,
    reconcile,
    team_walks_of,
)
from reconciler.core.planner import PassState, Plan, TaskInput, TaskResult
from reconciler.core.queues import fairshare
from reconciler.core.queues.dispatch import QueueAdmission
from reconciler.core.queues.shareresult import OwnTest
from specs.task.models import Phase, Reason
from specs.task.status import TaskStatus, TaskStatusBody

# Each team queue's head given to fair admission on the fast pass's first try.
_TEAM_HEAD = 8


def fast_pass(
    ctx: PassState,
    order: Order,
    previous: Mapping[str, Kept],
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    versions: Mapping[str, Hashable],
    given: Collection[str] | None = None,
    told: bool = False,
) -> tuple[Plan, dict[str, Kept], Order] | None:
    """`planner.finish`'s plan, redoing only what can have changed; None: this pass needs the
    full one (nothing of `ctx` is used then: the caller starts again). `told`: `given`
    came from the caller and names every sidecar read anew too (a spec's or not)."""
    now = ctx.now
    if now < order.now or order.flagged:
        return None
    # What changed, at C speed: versions, names; what expired, from the heap.
    names = list(specs)
    changed = set(given) if given is not None else changed_names(versions, order.versions)
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
        if flagged_task(name, specs[name], results[name]):
            return None
    for name in merged:
        planner.merge(ctx, name, results[name])
    # The quiet results' earliest end (a redone task's old entry is stale: its own counts).
    while heap and (heap[0][1] in redo or not _current(heap[0], order.loud, kept)):
        heappop(heap)
    if heap:
        ctx.until = min(ctx.until, heap[0][0])
    # The order, moved by the tasks whose key changed (a queue's list copied when it moves).
    keys = dict(order.keys)
    # The last pass's map, copied only when a key moves (most passes move none: a status).
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
        queue = owner_of(ctx, name)
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
                and not new[0]
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
        # A redone task whose key stayed may ask for more (or less) than before: whether it
        # can ever fit its queue is judged again (an edit of its resources or of preemptible
        # moves no key).
        for name in merged:
            entry = key_of.get(name)
            if entry is None or name in news:
                continue
            candidate = candidate_of(results.get(name) or kept[name].result)
            if not entry[0] and fairshare.never_fits(candidate, ceilings[owner_of(ctx, name)]):
                unfit.add(name)
            else:
                unfit.discard(name)

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

    def as_given(name: str) -> TaskStatusBody | None:
        return None if name in results else statuses[name].status

    def unchanged(name: str, reason: Reason, bucket: str) -> bool:
        if name in results:
            return False
        body = statuses[name].status
        return (
            body.queue_position is None
            and body.queue_position_bucket == bucket
            and body.reason == reason
        )

    cleanup.stop_strays(ctx, ctx.env.ours, specs)
    # The head of each queue, long enough that the policy's walk ends in it.
    options = ctx.options
    exact = options.exact_queue_positions
    # The exact places and the tasks that may start: where strict's walk ends (at its first
    # misfit), and most often backfill's and besteffort's too (a full cluster whose jobs
    # declare no end: no reservation, everyone behind the head).
    narrow = first = exact + options.max_inflight + 2
    if options.policy != "strict":  # may test backfill_candidates past the first misfit
        first += options.backfill_candidates
    fair: QueueAdmission | None = None
    spoken: dict[str, tuple[Waiting, str]] = {}
    # By queue: what its exact places past its walk were computed from (this pass's, for the
    # next), and the names of those handed back unchanged.
    places: dict[str, Places] = {}
    standing: dict[str, list[str]] = {}
    if ctx.queues is not None:
        # Each queue's walk most often ends a few tasks in (a full cluster, 1 task behind its
        # blocked head): start small, give more to a queue whose answer needs it.
        first = _TEAM_HEAD
    # A queue's tasks past its maxQueued are not candidates: its head is of the counted ones.
    counted = {queue: counted_entries(entries) for queue, entries in keys.items()}
    heads = {queue: min(counted[queue], first) for queue in keys}
    kept_walk: headadmission.HeadWalk | None = None
    reused = False
    if ctx.queues is None:
        entries = keys.get("", [])
        last_head = order.head
        if "" in heads and (last_head is None or len(last_head.candidates) <= narrow):
            # The narrow head first, unless the last walk needed more: a walk that ends in it
            # (Admission.tail) gives the answer the wide one would, at a fifth of the cost.
            heads[""] = min(heads[""], narrow)
        while True:
            candidates = [candidate_of(result_of(e[4])) for e in entries[: heads.get("", 0)]]
            kept_walk, reused = headadmission.walk_head(ctx, candidates, order.head)
            walked = kept_walk.admission
            if walked.tail is not None or heads.get("", 0) == len(entries):
                break
            heads[""] = min(len(entries), max(first, heads[""] * 4))
        gave = order.statuses

        # The same walk of the same prefix as last pass: its places and waits are those last
        # pass gave. A new walk (a job listed PENDING: the start's claim is the Starting
        # task's now) most often gives the same ones too, the started tasks gone from its
        # front: compared task by task. Either way a task that kept its status keeps it.
        gave_at = None if reused or last_head is None else headadmission.last_places(last_head)

        def stands(name: str, place: int, waiting: Waiting) -> bool:
            if gave_at is not None and gave_at.get(name) != (place, waiting):
                return False
            return name not in results and statuses.get(name) is gave.get(name)

        stand = stands if reused or gave_at else None
        walk = admit_prefix(ctx, candidates, walked, unchanged, adopt, stand)
        touched = set(merged) | set(walk.touched)
        tail_at, lack = walk.admission.tail or (None, None)
        ctx.walk = (tail_at, lack, len(walk.admission.start))
        walks: Walks = {"": ctx.walk}
    else:
        while True:
            prefix = sorted(e for queue, entries in keys.items() for e in entries[: heads[queue]])
            candidates = [candidate_of(result_of(e[4])) for e in prefix]
            cut = {q for q, n in heads.items() if n < counted[q]}
            # Those too big for their queue past the heads: admission takes them out first.
            beyond = [
                candidate_of(result_of(n))
                for n in sorted(unfit)
                if bisect_left(keys[q := owner_of(ctx, n)], key_of[n]) >= heads[q]
            ]
            fair = headadmission.walk_queues(ctx, candidates + beyond, cut)
            walks = team_walks_of(fair, keys, frozenset(unfit))
            # Short: its walk did not end in its head (or its answer may read past it).
            short = [q for q in cut if q in fair.short or walks[q][0] is None]
            for queue, tests in fair.unread.items():
                entries = keys[queue]
                if queue not in short and _own_past(tests, entries, heads[queue], unfit, result_of):
                    short.append(queue)
            if not short:
                break
            for queue in short:
                heads[queue] = min(counted[queue], heads[queue] * 4)
        # The exact places past a walk's end: each waits for the queue's tail lack, `ahead`
        # counting the tasks its walk kept (as the policy numbers them past its tail).
        extra: list[Entry] = []
        begun = set(fair.start)
        for queue, entries in keys.items():
            head, (_, lack, count) = heads[queue], walks[queue]
            end = min(len(entries), exact + count)
            if end <= head:
                continue
            ahead = sum(1 for e in entries[:head] if e[4] not in begun and e[4] not in unfit)
            places[queue] = placed = (head, end, lack, ahead, count)
            if order.places.get(queue) == placed and entries is order.keys.get(queue):
                same = _standing(entries[head:end], results, statuses, order, unfit, spoken)
                if same is not None:
                    # The same places, waits and statuses as last pass: handed back as they
                    # are (their order and the count NotConsidered kept as admission would).
                    standing[queue] = same
                    if isinstance(lack, NotConsidered):
                        ctx.not_considered += sum(1 for e in entries[head:end] if not e[0])
                    heads[queue] = end
                    continue
            for e in entries[head:end]:
                fair.queue_of[e[4]] = queue
                if e[0]:
                    fair.waiting[e[4]] = _queue_full(order.bounds, queue)
                elif e[4] not in unfit:
                    assert lack is not None  # a queue with counted tasks past its head has a tail
                    fair.waiting[e[4]] = Waiting(lack, ahead, queue)
                    ahead += 1
            extra.extend(entries[head:end])
            heads[queue] = end
        if extra:
            prefix = sorted(prefix + extra)
            candidates = [candidate_of(result_of(e[4])) for e in prefix]
        touched = set(merged) | set(
            headadmission.admit_queue_prefix(
                ctx, candidates, fair, as_given, adopt, order.words, spoken
            )
        )
        for queue, same in standing.items():
            ctx.order.setdefault(queue, []).extend(same)
    # Past each head: every task waits for its queue's tail lack.
    for queue, entries in keys.items():
        head = heads[queue]
        if head == len(entries):
            continue
        last = order.waiting.get(queue)
        if (
            entries is order.keys.get(queue)
            and last
            and not (walks[queue][2] or order.started.get(queue))
        ):
            # The same keys and no start, this pass or last: the same names waiting in order.
            ctx.order[queue] = last
        else:
            ctx.order.setdefault(queue, []).extend(map(ENTRY_NAME, entries[head:]))
        if head >= counted[queue]:
            continue  # past maxQueued, all of them: QueueFull, as their statuses say
        tail_at, lack, _ = walks[queue]
        assert lack is not None and tail_at is not None
        before = order.tail.get(queue)
        if before is not None and before is not lack.reason:
            return None  # the whole tail waits for another reason now: the full pass
        if isinstance(lack, NotConsidered):
            ctx.not_considered += counted[queue] - head
            ctx.not_considered -= sum(
                1
                for n in unfit
                if owner_of(ctx, n) == queue and bisect_left(entries, key_of[n]) >= head
            )
    # Past the heads: the tasks that moved, were walked last time, or sit near a bucket edge.
    far: set[str] = set(order.walked)
    far.update(n for n in merged if n in key_of)
    far.update(flipped)
    for queue in keys.keys() | order.keys.keys():
        started = walks.get(queue, (None, None, 0))[2]
        was = order.started.get(queue, 0)
        shift = moves.get(queue, 0) + abs(started - was)
        far.update(_near_edges(keys.get(queue, []), heads.get(queue, 0), started, shift, exact))
        far.update(
            n for n in _near_edges(order.keys.get(queue, []), 0, was, shift, exact) if n in key_of
        )
    # Those in a head were placed by admission above.
    far.difference_update(
        *(map(ENTRY_NAME, entries[: heads[queue]]) for queue, entries in keys.items())
    )
    label = ctx.queues is not None
    for name in far:
        entry = key_of.get(name)
        if entry is None:
            continue
        queue = owner_of(ctx, name)
        entries = keys[queue]
        position = bisect_left(entries, entry)
        if position < heads[queue]:
            continue
        _, lack, started = walks[queue]
        adopt(name)
        place = position - started + 1
        if entry[0]:
            waiting = _queue_full(order.bounds, queue)
        elif name in unfit and fair is not None:  # too big for its queue: OverQuota
            waiting = fair.waiting[name]
        else:
            assert lack is not None
            waiting = Waiting(lack, position - started, queue if label else None)
        if not unchanged(name, waiting.reason, admission.position_bucket(place, exact)):
            place_far(ctx, name, waiting, place, queue if label else None)
            touched.add(name)
    maybe = order.orphans | deleted | set(given or ()) if told else None
    orphans = orphans_of(statuses, specs, maybe)
    cleanup.expire_finished_jobs(ctx, ctx.env.ours, _awaited(statuses, merged, orphans))
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
        queues=fair.summary() if fair is not None else None,
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
        if result is not None and is_quiet(result, statuses.get(name), out.get(name)):
            named = statuses[name].status.submission_id
            if named is not None:
                watch[named] = name
            if (not was_quiet or name in results) and result.valid_until < math.inf:
                heappush(heap, (result.valid_until, name))
        else:
            loud.add(name)
    counts = (queued, starting, running)
    following = build_order(
        ctx,
        versions,
        keys,
        key_of,
        frozenset(loud),
        heap,
        watch,
        plan,
        walks,
        counts,
        names,
        ceilings,
        frozenset(unfit),
        order.bounds,
        arrivals,
        spoken,
        places,
        kept_walk,
        reused,
        frozenset(orphans),
    )
    return plan, kept, following


def _own_past(
    tests: list[OwnTest],
    entries: list[Entry],
    head: int,
    unfit: Collection[str],
    result_of: Callable[[str], TaskResult],
) -> bool:
    """Whether the least-served queue's own walk (`fairshare._own_first`), which found
    nothing in the head it was given, would start a task past it: its counted tasks past
    `head` (those too big for it left out, as admission drops them), each read by the tests
    whose walk reaches that far. With the cluster full none fits, and the head given stands."""
    bounds = [t.more for t in tests]
    most = None if None in bounds else max(b for b in bounds if b is not None)
    # Enough entries for `most` candidates: the unfit ones are skipped, as are those past
    # maxQueued (e[0]: no candidates)
    past = entries[head:] if most is None else entries[head : head + most + len(unfit)]
    candidates = [candidate_of(result_of(e[4])) for e in past if not e[0] and e[4] not in unfit]
    return any(test.passes(c) for test in tests for c in candidates[: test.more])


def _standing(
    entries: list[Entry],
    results: Mapping[str, TaskResult],
    statuses: Mapping[str, TaskStatus],
    order: Order,
    unfit: Collection[str],
    spoken: dict[str, tuple[Waiting, str]],
) -> list[str] | None:
    """The names of a queue's exact places past its walk whose places and waits are those of
    last pass (the caller checks that), when each still has the status last pass gave it and
    was not redone: `admit_queue_prefix` would leave each as it is. None: place them again."""
    names = list(map(ENTRY_NAME, entries))
    last, words = order.statuses, order.words
    for name in names:
        if name in results or name in unfit or statuses.get(name) is not last.get(name):
            return None
        if name not in words:
            return None
    spoken.update((name, words[name]) for name in names)
    return names


def _moved(
    ctx: PassState, order: Order, names: list[str], results: Mapping[str, TaskResult]
) -> tuple[dict[str, Entry | None], Mapping[str, list[Arrival]], set[str]]:
    """The new entries of the tasks whose key changed, and of those that crossed their queue's
    maxQueued because of it (`flipped`: their key did not change); the arrivals after them."""
    key_of, bounds = order.key_of, order.bounds
    news: dict[str, Entry | None] = {}
    arrivals = dict(order.arrivals)
    changes: dict[str, int] = {}
    for name in names:
        old, new = key_of.get(name), entry_of(name, results.get(name))
        if (None if old is None else old[1:]) == (None if new is None else new[1:]):
            continue  # the same key (its maxQueued flag is judged below)
        news[name] = new
        bound = bounds.get(owner_of(ctx, name))
        if bound is None:
            continue
        group = bound[0]
        if group not in changes:
            arrivals[group] = list(arrivals.get(group, ()))
        changes[group] = changes.get(group, 0) + 1
        arrived = arrivals[group]
        if old is not None:
            del arrived[bisect_left(arrived, (old[2], name))]
        if new is not None:
            insort(arrived, (new[2], name))
    flipped: set[str] = set()
    if not changes:
        return news, arrivals, flipped
    for name, new in news.items():
        bound = bounds.get(owner_of(ctx, name))
        if new is not None and bound is not None:
            arrived = arrivals[bound[0]]
            news[name] = (int(bisect_left(arrived, (new[2], name)) >= bound[1]), *new[1:])
    # Each change moves a task's index by one at most: only those within that many of the
    # limit can cross it.
    limits = dict(bounds.values())
    for group, count in changes.items():
        limit = limits[group]
        low, high = max(limit - count, 0), limit + count
        before, after = order.arrivals.get(group, []), arrivals[group]
        for _, name in [*before[low:high], *after[low:high]]:
            if name in news or name not in key_of:
                continue
            entry = key_of[name]
            full = int(bisect_left(after, (entry[2], name)) >= limit)
            if full != entry[0]:
                news[name] = (full, *entry[1:])
                flipped.add(name)
    return news, arrivals, flipped


def _queue_full(bounds: Mapping[str, tuple[str, int]], queue: str) -> Waiting:
    """A task of `queue` past its maxQueued, as queueing.queue_full words it."""
    return Waiting(QueueFull(*bounds[queue]), queue=queue)


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
            yield e[4]
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
