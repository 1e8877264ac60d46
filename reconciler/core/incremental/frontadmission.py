"""Admission of the front of each queue, for the fast pass (core/incremental/fastpass.py): the
policy's or fair share's walk over a prefix of the kept order, as `admission.admit` runs it
over the whole queue, and the places of the tasks past the prefix."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from reconciler.core import charges
from reconciler.core.admission import policies
from reconciler.core.admission.waits import (
    BehindTask,
    NotConsidered,
    Preempting,
    ReservedStart,
    Waiting,
)
from reconciler.core.admit import (
    LeftOver,
    QueueShares,
    ScaleUpState,
    admission_of,
    far_message,
    free_capacity,
    keep_for_scale_up,
    position_bucket,
    scale_up,
    scale_wait,
    start_slots,
)
from reconciler.core.queues import dispatch
from reconciler.core.task import lifecycle
from reconciler.core.timestamps import to_datetime
from specs.cluster import Capacity
from specs.task.models import Phase, Reason
from specs.task.status import TaskStatusBody

if TYPE_CHECKING:
    from reconciler.core.fastcontext import FastPassContext


class Worded(NamedTuple):
    """A task's wait at an exact place and the message it was given for it."""

    waiting: Waiting
    message: str


@dataclass
class Walk:
    """What `admit_prefix` did with the front of a long queue."""

    admission: policies.Admission
    touched: list[str]  # tasks whose status it set anew (the others keep theirs)


def _walk(
    ctx: FastPassContext, prefix: list[policies.Candidate], cut: Collection[str]
) -> policies.Admission | dispatch.QueueAdmission:
    """`admit`'s admission over `prefix`, with the slots the tasks starting now leave."""
    shares = None
    if ctx.queues is not None:
        # (its preemptors ready: found over every task, not only those merged so far)
        shares = QueueShares(ctx.queues, ctx.usage, ctx.holdings.in_use, ctx.ready)
    held, slots = (
        charges.room(ctx.obs, ctx.options, ctx.used, ctx.unobserved),
        start_slots(ctx.options, ctx.bodies),
    )
    return admission_of(
        ctx.options,
        ctx.obs,
        ctx.now,
        ctx.claims,
        prefix,
        held.free,
        slots,
        shares,
        cut,
        in_fact=held.in_fact,
    )


@dataclass(frozen=True)
class FrontWalk:
    """The policy's walk over the front of the one queue, with everything it read: the walk is
    a function of these and of `now`, and its answer is the same at any `now` from the pass
    that made it up to `holds_until` (policies.admit_bounded is pure)."""

    policy: str
    bound: int
    candidates: list[policies.Candidate]
    free: Capacity
    slots: int
    claims: list[policies.Claim]
    holds_until: float
    admission: policies.Admission
    # With elements capped by their array's maxParallel in the front (no candidates): every
    # task of the front in order, and those elements' waits; else () and {}.
    placed: tuple[str, ...] = ()
    capped: Mapping[str, Waiting] = field(default_factory=dict)
    # How the cluster was held beyond what its jobs declare (the words of its waits).
    in_fact: charges.InFact | None = None


def walk_front(
    ctx: FastPassContext,
    prefix: list[policies.Candidate],
    last: FrontWalk | None,
    placed: tuple[str, ...] = (),
    held: Mapping[str, Waiting] | None = None,
) -> tuple[FrontWalk, bool]:
    """The policy's walk over `prefix` (as `admit` runs it), and whether it is `last`'s,
    reused: when every input of the walk is the same, the front's elements capped by their
    array (`held`, among the front's tasks in order, `placed`) stand where they stood, and
    `now` has not passed `last.holds_until`. Most passes of a busy queue only move an active
    task's status (a job PENDING, then RUNNING): the fronts wait as they did, and walking them
    again would give the same answer."""
    held = held or {}
    held_room, slots = (
        charges.room(ctx.obs, ctx.options, ctx.used, ctx.unobserved),
        start_slots(ctx.options, ctx.bodies),
    )
    free = held_room.free
    options = ctx.options
    if (
        last is not None
        and ctx.now <= last.holds_until
        and last.free == free
        and last.in_fact == held_room.in_fact
        and _same_slots(last, slots)
        and last.policy == options.policy
        and last.bound == options.backfill_candidates
        and last.candidates == prefix
        and last.claims == ctx.claims
        and last.placed == placed
        and last.capped == held
    ):
        return last, True
    admission = _walk(ctx, prefix, ())
    assert isinstance(admission, policies.Admission)
    until = _holds_until(admission, prefix, ctx.now, options.policy)
    walk = FrontWalk(
        options.policy,
        options.backfill_candidates,
        prefix,
        free,
        slots,
        list(ctx.claims),
        until,
        admission,
        placed,
        held,
        held_room.in_fact,
    )
    return walk, False


class GivenPlace(NamedTuple):
    """The place and wait `admit_prefix` gave a waiting task."""

    place: int
    waiting: Waiting


def last_places(last: FrontWalk, exact: int) -> dict[str, GivenPlace]:
    """The place and wait `admit_prefix` gave each waiting task of `last`'s prefix (but the
    capped elements past the `exact` places: admit_prefix reads their buckets alone)."""
    admission = last.admission
    started, waiting, capped = set(admission.start), admission.waiting, last.capped
    front = last.placed or [c.name for c in last.candidates]
    names = [name for name in front if name not in started]
    return {
        name: GivenPlace(place, capped.get(name) or waiting[name])
        for place, name in enumerate(names, 1)
        if place <= exact or name not in capped
    }


def _same_slots(last: FrontWalk, slots: int) -> bool:
    """Whether `slots` walks as `last.slots` did. A walk reads its slots only as `slots > 0`
    until a start spends one, so a walk that started nothing (a Starting task became Running:
    one slot more) gives the same answer with any other positive count."""
    if last.slots == slots:
        return True
    return not last.admission.start and (last.slots > 0) == (slots > 0)


def _holds_until(
    admission: policies.Admission, prefix: list[policies.Candidate], now: float, policy: str
) -> float:
    """Up to which `now` the walk gives this same answer (its other inputs the same). A start
    counts its claim from `now`: this instant only. Strict and besteffort never read the
    clock. Backfill that started nothing reads it in two places: the front's reserved start,
    max(the claims' end at which it fits, now), which stays while now has not passed it; and
    whether a later task ends by then (now + its timeout <= the start), false for every one
    (it would have started) and so still false later, with the start the same."""
    if admission.start:
        return now
    until = admission.until
    if policy == "backfill" and prefix:
        waiting = admission.waiting.get(prefix[0].name)
        if waiting is not None and isinstance(waiting.note, ReservedStart):
            # The start at exactly `now` may be `now` itself, which moves with the clock.
            until = min(until, waiting.note.at)
    return until


@dataclass(frozen=True)
class ScaledFront:
    """The policy's walk over the front of the one queue as the autoscaler's demand leaves it
    (`keep_for_scale_up`, on a copy), and that demand (`scale_up`)."""

    admission: policies.Admission
    scale: ScaleUpState
    free: Capacity  # what admission gave out
    left_over: LeftOver | None  # what keep_for_scale_up left (None: it did not run)

    def behind_holder(self) -> LeftOver | None:
        """What is left for the tasks past the walk's end when each of them may start on it:
        they all wait behind a blocked front (BehindTask) that waits for nodes, and under
        backfill any of them that fits what that front leaves starts (keep_for_scale_up),
        wherever it stands. None: none of them starts."""
        tail, left_over = self.admission.tail, self.left_over
        if (
            left_over is None
            or tail is None
            or not isinstance(tail.lack, BehindTask)
            or left_over.holder.get("") != tail.lack.task
        ):
            return None
        return left_over


def scale_front(
    ctx: FastPassContext,
    prefix: list[policies.Candidate],
    walked: policies.Admission,
    bodies: Mapping[str, TaskStatusBody],
) -> ScaledFront:
    """`admit`'s demand for nodes over `prefix` and what it does to `walked`, the policy's
    walk over it (left as it is: a later pass may reuse it). `bodies`: each of `prefix`'s. It
    is the whole queue's when both walks end in `prefix` (`Admission.tail`,
    `ScaleUpState.walk_ended`), `prefix` holds every task whose status dates a request for
    nodes (only those can sit out a backoff), and no task past it would start on what the
    demand leaves (`ScaledFront.behind_holder`)."""
    admission = policies.Admission(
        list(walked.start), dict(walked.waiting), walked.tail, walked.until
    )
    free, slots = (
        free_capacity(ctx.obs, ctx.options, ctx.used, ctx.unobserved),
        start_slots(ctx.options, ctx.bodies),
    )
    scale = scale_up(ctx.inputs, bodies, ctx.claims, prefix, free, slots, None, admission, {})
    left_over = None
    if scale.demand and ctx.options.policy != "besteffort":
        left_over = keep_for_scale_up(ctx.inputs, prefix, free, slots, admission, scale)
    return ScaledFront(admission, scale, free, left_over)


def admit_prefix(
    ctx: FastPassContext,
    prefix: list[policies.Candidate],
    admission: policies.Admission,
    unchanged: Callable[[str, Reason, str], bool],
    adopt: Callable[[str], None],
    standing: Callable[[str, int, Waiting], bool] | None = None,
    capped: Mapping[str, Waiting] | None = None,
    placed: tuple[str, ...] = (),
    scale: ScaleUpState | None = None,
    preempting: Mapping[str, Preempting] | None = None,
) -> Walk:
    """`admit` on the front of the queue, for a pass with one queue and no dependency gate or
    stopping victim (the incremental planner checks that). `prefix`: the first candidates in
    order, long enough that the policy's walk ends in it (`Admission.tail`) or the whole
    queue; with elements `capped` by their array's maxParallel among them (no candidates),
    `placed` holds all in order, and they wait so. `unchanged(name, reason, bucket)`: whether
    a far task's status already says so, in which case it is left as it is. `admission`: the
    policy's walk over `prefix` (on an autoscaling cluster, as `scale_front` leaves it, and
    `scale` its demand for nodes). `adopt(name)`: puts a task's own result in the pass (its
    body and task) before admission reads or sets them. `standing(name, place, wait)`: the
    last pass gave the task this same place and wait, and it still has the status that pass
    gave it and was not redone: left as it is (admit would set it so again). `preempting`:
    what each preemptor of this pass waits for (frontpreemption.preempt_fronts) instead of
    its wait in the walk."""
    ctx.until = min(ctx.until, max(admission.until, ctx.now))
    if scale is not None:
        ctx.until = min(ctx.until, max(scale.until, ctx.now))
        ctx.scale_demand.extend(scale.demand)
    started = set(admission.start)
    exact = ctx.options.exact_queue_positions
    touched: list[str] = []
    place = 0
    names = placed or [c.name for c in prefix]
    order = ctx.order.setdefault("", []) if len(names) > len(started) else []
    starting = {c.name: c for c in prefix if c.name in started}
    by_name = {c.name: c for c in prefix} if scale is not None else starting
    capped = capped or {}
    far_bucket, far_end = "", 0  # the far capped elements' bucket, up to place `far_end`
    for name in names:
        if name in started:
            adopt(name)
            ctx.start(starting[name])
            touched.append(name)
            continue
        place += 1
        order.append(name)
        if preempting and name in preempting:
            adopt(name)
            _await_victims(ctx, name, Waiting(preempting[name]), place, None)
            touched.append(name)
            continue
        held = capped.get(name)
        if held is not None and place > exact:
            # Far, its wait its array's: its status reads its bucket alone.
            if place > far_end:
                far_bucket, far_end = _bucket_of(place, exact)
            if not unchanged(name, held.reason, far_bucket):
                adopt(name)
                place_far(ctx, name, held, place)
                touched.append(name)
            continue
        waiting = held or admission.waiting[name]
        asked_at = None
        if scale is not None and held is None:
            _heed_start(ctx, waiting.estimated_start)  # as admit's: the tasks behind read it
            scaled, asked_at = scale_wait(ctx.inputs, scale, by_name[name], waiting)
            assert scaled is not None
            waiting = scaled
        eta = _heed(ctx, waiting)
        if standing is not None and standing(name, place, waiting):
            continue
        if place > exact:
            bucket = position_bucket(place, exact)
            if asked_at is None and unchanged(name, waiting.reason, bucket):
                continue
            adopt(name)
            body = ctx.bodies[name]
            message = far_message(bucket, waiting, None)
            ctx.bodies[name] = lifecycle.queue(
                body, None, waiting.reason, message, None, asked_at, bucket
            )
        else:
            adopt(name)
            body = ctx.bodies[name]
            at = to_datetime(eta) if eta else None
            said = waiting.message_to(name, ctx.options.visibility)
            ctx.bodies[name] = lifecycle.queue(
                body, place, waiting.reason, said, at, asked_at, None
            )
        touched.append(name)
    return Walk(admission, touched)


def walk_queues(
    ctx: FastPassContext, prefix: list[policies.Candidate], cut: Collection[str]
) -> dispatch.QueueAdmission:
    """The queues' admission over the fronts of their queues, as `admit` runs it, for a pass
    with team queues and no autoscaler, dependency gate or stopping victim, the tasks past
    maxQueued and those capped by their array left out (the incremental planner checks that).
    `prefix`: the first candidates of each queue, in the cluster's order; enough that each
    queue's walk ends in its part (`QueueAdmission.tails`) or takes all of it; `cut`: the
    queues given in part (those the answer may not hold for are in `short`)."""
    admission = _walk(ctx, prefix, cut)
    assert isinstance(admission, dispatch.QueueAdmission)
    return admission


def admit_queue_prefix(
    ctx: FastPassContext,
    prefix: list[policies.Candidate],
    admission: dispatch.QueueAdmission,
    given: Callable[[str], TaskStatusBody | None],
    adopt: Callable[[str], None],
    words: Mapping[str, Worded] | None = None,
    spoken: dict[str, Worded] | None = None,
    capped: Mapping[str, Waiting] | None = None,
    preempting: Mapping[str, Preempting] | None = None,
) -> list[str]:
    """`admit` on the fronts of the team queues (`prefix`, `admission`: walk_queues'), with
    `adopt` as in admit_prefix; returns the tasks whose status it set anew. `given(name)`: the
    status body a task not redone this pass was given (None for one redone): one that already
    waits as admission says is left as it is. `words`: the last pass's wait and message of
    each task at an exact place, reused when its wait is the same (most are, in a queue that
    did not move); `spoken` receives this pass's. `capped`: the elements of `prefix` held back
    by their array's maxParallel (no candidates of `admission`), and why. `preempting`: as in
    admit_prefix."""
    ctx.queue_admission = admission
    ctx.until = min(ctx.until, max(admission.until, ctx.now))
    started = set(admission.start)
    exact = ctx.options.exact_queue_positions
    touched: list[str] = []
    places: dict[str, int] = {}
    capped = capped or {}
    far: dict[tuple[str, str], str] = {}  # a far capped element's message, by bucket and queue
    buckets: dict[str, tuple[str, int]] = {}  # by queue: its far places' bucket, up to where
    for candidate in prefix:
        name = candidate.name
        if name in started:
            adopt(name)
            ctx.start(candidate)
            touched.append(name)
            continue
        owner = admission.queue_of[name]
        place = places[owner] = places.get(owner, 0) + 1
        ctx.order.setdefault(owner, []).append(name)
        if preempting and name in preempting:
            adopt(name)
            _await_victims(ctx, name, Waiting(preempting[name]), place, owner)
            touched.append(name)
            continue
        held = capped.get(name)
        if held is not None and place > exact:
            # Far, its wait its array's: its status reads its bucket and queue alone.
            far_bucket, far_end = buckets.get(owner, ("", 0))
            if place > far_end:
                far_bucket, far_end = buckets[owner] = _bucket_of(place, exact)
            said = far.get((far_bucket, owner))
            if said is None:
                said = far[far_bucket, owner] = far_message(far_bucket, held, owner)
            body = given(name)
            if body is None or not _queued_as(body, None, far_bucket, held.reason, said, None):
                adopt(name)
                place_far(ctx, name, held, place, owner)
                touched.append(name)
            continue
        waiting = held or admission.waiting.get(name)
        eta = _heed(ctx, waiting)
        reason = waiting.reason if waiting is not None else Reason.QUEUED
        position: int | None = place
        bucket: str | None = None
        at: datetime | None = None
        if place > exact:
            bucket = position_bucket(place, exact)
            position, said = None, far_message(bucket, waiting, owner)
        else:
            at = to_datetime(eta) if eta else None
            said = "queued"
            if waiting is not None:
                last = words.get(name) if words is not None else None
                said = waiting.message_to(name, ctx.options.visibility)
                if last is not None and last.waiting == waiting:
                    said = last.message
                if spoken is not None:
                    spoken[name] = Worded(waiting, said)
        body = given(name)
        if body is not None and _queued_as(body, position, bucket, reason, said, at):
            continue
        adopt(name)
        ctx.bodies[name] = lifecycle.queue(
            ctx.bodies[name], position, reason, said, at, None, bucket
        )
        touched.append(name)
    return touched


def _bucket_of(place: int, exact: int) -> tuple[str, int]:
    """A far place's bucket (position_bucket), and the last place in it: the places in turn
    past it need it again."""
    bucket = position_bucket(place, exact)
    return bucket, int(bucket[1:]) * 10


def _await_victims(
    ctx: FastPassContext, name: str, waiting: Waiting, place: int, queue: str | None
) -> None:
    """A preemptor at `place`: its status while its victims stop, as `admit` sets it."""
    exact = ctx.options.exact_queue_positions
    body = ctx.bodies[name]
    if place > exact:
        bucket = position_bucket(place, exact)
        message = far_message(bucket, waiting, queue)
        ctx.bodies[name] = lifecycle.wait_for_victims(body, None, message, None, bucket)
    else:
        said = waiting.message_to(name, ctx.options.visibility)
        ctx.bodies[name] = lifecycle.wait_for_victims(body, place, said, None)


def _heed(ctx: FastPassContext, waiting: Waiting | None) -> float | None:
    """What a waiting task tells the pass: one more task admission did not consider, and its
    estimated start (the pass wakes by then); returns that start."""
    if waiting is None:
        return None
    if isinstance(waiting.lacks, NotConsidered):
        ctx.not_considered += 1
    eta = waiting.estimated_start
    _heed_start(ctx, eta)
    return eta


def _heed_start(ctx: FastPassContext, eta: float | None) -> None:
    """A reserved start holds the pass's answer up to it (it moves with the clock once past)."""
    if eta is not None:
        ctx.until = min(ctx.until, max(eta, ctx.now))


def _queued_as(
    body: TaskStatusBody,
    position: int | None,
    bucket: str | None,
    reason: Reason,
    message: str,
    at: datetime | None,
) -> bool:
    """Whether `lifecycle.queue` with these would leave `body` as it is."""
    return (
        body.phase is Phase.QUEUED
        and body.queue_position == position
        and body.queue_position_bucket == bucket
        and body.reason == reason
        and body.message == message
        and body.estimated_start_at == at
        and body.scale_up_requested_at is None
        and body.missing_since is None
    )


def place_far(
    ctx: FastPassContext, name: str, lack: Waiting, place: int, queue: str | None = None
) -> None:
    """A task past the walk (`Admission.tail`) at `place`: its far status, as `admit` sets it."""
    bucket = position_bucket(place, ctx.options.exact_queue_positions)
    message = far_message(bucket, lack, queue)
    ctx.bodies[name] = lifecycle.queue(
        ctx.bodies[name], None, lack.reason, message, None, None, bucket
    )
