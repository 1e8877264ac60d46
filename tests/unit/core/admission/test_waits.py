"""Why a task waits: each typed value, its reason, and the words `render` makes of it."""

from __future__ import annotations

import math

import pytest

from reconciler.core.admission.waits import (
    ArrayAtMaxParallel,
    AwaitingVictims,
    BehindReservation,
    BehindScaleUp,
    BehindTask,
    BorrowBound,
    HeldInFact,
    InflightLimit,
    KeptForQueue,
    NextPass,
    NoEstimate,
    NotConsidered,
    OverHolder,
    OverQuota,
    PreemptedBy,
    Preempting,
    QueueFull,
    QuotaShortfall,
    ReservedStart,
    RunningLimit,
    ScaleUp,
    ScaleUpTimedOut,
    Shortfall,
    Waiting,
    render,
    shortfall,
)
from specs.cluster import Capacity
from specs.task.models import Reason
from specs.task.visibility import ANOTHER_FOLDER, Visibility

GIB = 1024**3
T = 1_767_225_600.0  # 2026-01-01T00:00:00Z

ROWS = [
    (Waiting(Shortfall("cpu", 2, 0)), Reason.WAITING_FOR_RESOURCES, "needs 2 CPU; 0 free"),
    (Waiting(Shortfall("gpu", 1, 0.5)), Reason.WAITING_FOR_RESOURCES, "needs 1 GPU; 0.5 free"),
    (
        Waiting(Shortfall("memory", 2 * GIB, GIB)),
        Reason.WAITING_FOR_RESOURCES,
        "needs 2Gi memory; 1Gi free",
    ),
    (
        Waiting(HeldInFact("cpu", 2, 0, OverHolder("team-b/train", True, 8, 1)), 0),
        Reason.WAITING_FOR_RESOURCES,
        "cluster full in fact: team-b/train holds 8 CPU, declared 1; needs 2 CPU; 0 free; "
        "first in queue",
    ),
    (
        Waiting(HeldInFact("gpu", 1, 0, OverHolder("raysubmit_x", False, 2, 0), 0)),
        Reason.WAITING_FOR_RESOURCES,
        "cluster full in fact: job raysubmit_x holds 2 GPU, declared 0; needs 1 GPU; 0 free",
    ),
    (
        Waiting(HeldInFact("memory", 4 * GIB, GIB, OverHolder("a", True, 8 * GIB, GIB))),
        Reason.WAITING_FOR_RESOURCES,
        "cluster full in fact: a holds 8Gi memory, declared 1Gi; needs 4Gi memory; 1Gi free",
    ),
    (
        Waiting(HeldInFact("cpu", 2, 1, None, 1)),
        Reason.WAITING_FOR_RESOURCES,
        "cluster full in fact: Ray reports 1 CPU available, less than the declarations leave; "
        "needs 2 CPU; 1 free",
    ),
    (
        Waiting(QuotaShortfall("team-a", "cpu", 3, 4, 0, BorrowBound.BORROWING_LIMIT, 0)),
        Reason.QUOTA_EXCEEDED,
        "team-a uses 3/4 CPU of its quota; can borrow 0 more (borrowingLimit 0)",
    ),
    (
        Waiting(QuotaShortfall("b", "gpu", 1, 1, 1, BorrowBound.OTHERS_LEND, 1)),
        Reason.QUOTA_EXCEEDED,
        "b uses 1/1 GPU of its quota; can borrow 1 more (other queues lend 1 more)",
    ),
    (
        Waiting(QuotaShortfall("b", "cpu", 2, 2, 0, BorrowBound.NOTHING_TO_LEND)),
        Reason.QUOTA_EXCEEDED,
        "b uses 2/2 CPU of its quota; can borrow 0 more (no other queue has idle quota to lend)",
    ),
    (
        Waiting(QuotaShortfall("b", "cpu", 4, 4, 0, BorrowBound.NOT_PREEMPTIBLE, 0)),
        Reason.QUOTA_EXCEEDED,
        "b uses 4/4 CPU of its quota; can borrow 0 more (a task with preemptible: false runs "
        "only within its queue's nominal quota)",
    ),
    (
        Waiting(OverQuota("a", "cpu", 9, 3, math.inf)),
        Reason.QUOTA_EXCEEDED,
        "asks for 9 CPU; a may hold at most unlimited (nominal 3 + borrowingLimit unlimited); "
        "it cannot start until the queue configuration changes",
    ),
    (
        Waiting(OverQuota("a", "cpu", 6, 4, math.inf, 1)),
        Reason.QUOTA_EXCEEDED,
        "asks for 6 CPU; a may hold at most 5 (nominal 4 + what the other queues' "
        "lendingLimits let them lend 1); it cannot start until the queue configuration changes",
    ),
    (
        Waiting(OverQuota("a", "cpu", 2, 0, 0, 0, preemptible=False)),
        Reason.QUOTA_EXCEEDED,
        "asks for 2 CPU; a may hold at most 0 for it (nominal 0: a task with preemptible: false "
        "never borrows); it cannot start until the queue configuration or the task changes",
    ),
    (
        Waiting(RunningLimit("team-a", 3), 1, "team-a"),
        Reason.MAX_RUNNING,
        "team-a has 3 tasks starting or running, its maxRunning; 1 task ahead in team-a",
    ),
    (
        Waiting(RunningLimit("team-a", 1), 0, "team-a"),
        Reason.MAX_RUNNING,
        "team-a has 1 task starting or running, its maxRunning; first in team-a",
    ),
    (
        Waiting(ArrayAtMaxParallel("team-a/sweep", 1)),
        Reason.ARRAY_AT_MAX_PARALLEL,
        "array team-a/sweep has 1 element starting or running (maxParallel)",
    ),
    (
        Waiting(QueueFull("team-a", 5), queue="team-a"),
        Reason.QUEUE_FULL,
        "team-a is full: 5 tasks queued before it (maxQueued 5); this one is not counted until "
        "some of them start",
    ),
    (
        Waiting(NotConsidered(500), 612),
        Reason.NOT_CONSIDERED,
        "not considered this pass: admission tests at most 500 tasks past the first that "
        "cannot start (RAYQUEUE_BACKFILL_CANDIDATES); 612 tasks ahead",
    ),
    (
        Waiting(InflightLimit(), 0),
        Reason.INFLIGHT_LIMIT,
        "too many jobs starting at once; first in queue",
    ),
    (
        Waiting(ArrayAtMaxParallel("team-a/sweep", 4)),
        Reason.ARRAY_AT_MAX_PARALLEL,
        "array team-a/sweep has 4 elements starting or running (maxParallel)",
    ),
    (
        Waiting(BehindTask("big"), 1, "team-a"),
        Reason.WAITING_BEHIND_HIGHER_PRIORITY,
        "waits behind big; 1 task ahead in team-a",
    ),
    (
        Waiting(BehindReservation("head", T, 60), 2),
        Reason.WAITING_BEHIND_RESERVATION,
        "fits now, but its timeoutSeconds=60 ends after head's reserved start at "
        "2026-01-01T00:00:00Z; 2 tasks ahead",
    ),
    (
        Waiting(BehindReservation("head", T, 0)),
        Reason.WAITING_BEHIND_RESERVATION,
        "fits now, but it has no timeoutSeconds and would hold resources past head's reserved "
        "start at 2026-01-01T00:00:00Z",
    ),
    (
        Waiting(KeptForQueue("a", "b", "b/wide")),
        Reason.WAITING_BEHIND_RESERVATION,
        "fits now, but a is above its nominal quota and b has a lower share; the free resources "
        "are kept for b/wide",
    ),
    (
        Waiting(Preempting(("x", "y"), (0, 1), Capacity(cpu=3), Capacity(cpu=2), lent=True)),
        Reason.PREEMPTING,
        "preempting lent quota of x, y (priority 0, 1; 3 CPU): it needs 2 CPU and only those "
        "free enough; starts once they have stopped",
    ),
    (
        Waiting(Preempting(("x",), (0,), Capacity(cpu=1), Capacity(cpu=1), lent=False)),
        Reason.PREEMPTING,
        "preempting x (priority 0; 1 CPU): it needs 1 CPU and only those free enough; starts "
        "once they have stopped",
    ),
    (
        Waiting(AwaitingVictims(("x",))),
        Reason.PREEMPTING,
        "preempted x; starts once they have stopped (their resources are reserved for it)",
    ),
    (
        Waiting(PreemptedBy("boss")),
        Reason.PREEMPTED,
        "preempted by boss; queued again once its stopped run is gone",
    ),
    (
        Waiting(Shortfall("cpu", 6, 2), 0, note=ReservedStart(T)),
        Reason.WAITING_FOR_RESOURCES,
        "needs 6 CPU; 2 free; first in queue; resources reserved, starts by 2026-01-01T00:00:00Z",
    ),
    (
        Waiting(Shortfall("cpu", 6, 2), 0, "a", NoEstimate()),
        Reason.WAITING_FOR_RESOURCES,
        "needs 6 CPU; 2 free; first in a; no start estimate: it needs resources held by jobs "
        "without timeoutSeconds",
    ),
    (
        Waiting(Shortfall("cpu", 1, 0), queue="a", note=NextPass()),
        Reason.WAITING_FOR_RESOURCES,
        "needs 1 CPU; 0 free; waits for the next pass",
    ),
    (
        Waiting(ScaleUp(Capacity(8, 1), T, 1, T + 600), 0),
        Reason.WAITING_FOR_SCALE_UP,
        "requested 8 CPU, 1 GPU from the autoscaler at 2026-01-01T00:00:00Z; 1 node pending; "
        "gives up at 2026-01-01T00:10:00Z; first in queue",
    ),
    (
        Waiting(ScaleUp(Capacity(2), T, 0, T + 60)),
        Reason.WAITING_FOR_SCALE_UP,
        "requested 2 CPU from the autoscaler at 2026-01-01T00:00:00Z; no node pending; "
        "gives up at 2026-01-01T00:01:00Z",
    ),
    (
        Waiting(ScaleUpTimedOut(Capacity(0, 4), T, 600, T + 1200, ("quota exceeded",)), 2),
        Reason.SCALE_UP_TIMEOUT,
        "the autoscaler did not bring 4 GPU within 600 s of 2026-01-01T00:00:00Z (it reports: "
        "quota exceeded); asks again at 2026-01-01T00:20:00Z; 2 tasks ahead",
    ),
    (
        Waiting(BehindScaleUp("big"), 1),
        Reason.WAITING_BEHIND_RESERVATION,
        "fits now, but the free resources are kept for big, which waits for new nodes; "
        "1 task ahead",
    ),
]


@pytest.mark.parametrize(("waiting", "reason", "message"), ROWS)
def test_each_wait_renders_its_words(waiting: Waiting, reason: Reason, message: str) -> None:
    assert waiting.reason is reason
    assert render(waiting) == waiting.message == message


def test_only_a_reserved_start_gives_an_estimate() -> None:
    assert Waiting(Shortfall("cpu", 1, 0), note=ReservedStart(T)).estimated_start == T
    assert Waiting(Shortfall("cpu", 1, 0), note=NoEstimate()).estimated_start is None


@pytest.mark.parametrize(
    ("request_", "free", "expected"),
    [
        (Capacity(2, 0, 0), Capacity(-1, 0, 0), Shortfall("cpu", 2, 0)),  # never below 0 free
        (Capacity(1, 1, 0), Capacity(4, 0, 0), Shortfall("gpu", 1, 0)),
        (Capacity(1, 0, 2 * GIB), Capacity(4, 0, GIB), Shortfall("memory", 2 * GIB, GIB)),
    ],
)
def test_a_shortfall_names_the_first_resource_that_does_not_fit(
    request_: Capacity, free: Capacity, expected: Shortfall
) -> None:
    assert shortfall(request_, free) == expected


def test_a_holder_in_a_folder_the_reader_may_not_see_is_not_named() -> None:
    teams = Visibility(readers=(("team-a",), ("team-b",)))
    waiting = Waiting(HeldInFact("cpu", 1, 0, OverHolder("team-b/train", True, 8, 1)))
    assert waiting.message_to("team-a/x", teams).startswith(
        f"cluster full in fact: {ANOTHER_FOLDER} holds 8 CPU, declared 1"
    )
    assert waiting.message_to("team-b/y", teams).startswith(
        "cluster full in fact: team-b/train holds 8 CPU"
    )
