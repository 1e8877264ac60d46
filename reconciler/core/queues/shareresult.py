"""Fair share's result (each queue's state, the pass's admission) and the room held for the
least-served queue's front (`HeldRoom`): what reconciler.core.queues.fairshare decides with,
and what its callers read. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from reconciler.core.admission.policies import Candidate, WalkTail
from reconciler.core.admission.waits import Waiting
from reconciler.core.queues.quotas import EPS, RESOURCES, of
from specs.cluster import Capacity


@dataclass(frozen=True)
class QueueState:
    """One queue after a pass."""

    name: str
    nominal: Capacity
    usage: Capacity
    borrowed: Capacity
    lent: Capacity
    share: float  # weighted dominant share (with the decayed past use, when counted)
    admitted: tuple[str, ...]  # started in this pass, in order
    above_nominal: Capacity = field(default_factory=Capacity)  # the most it may hold above
    front: str | None = None  # its first task not started (and not too big for its quota)
    parent: str | None = None  # the queue it divides (nested queues)
    # What `share` is computed from besides usage (quotas.dominant_share), so that a share
    # after a change of usage can be computed again (fair-share preemption).
    weight: float = 1.0
    past: Capacity | None = None  # its decayed mean use, when counted
    lend: Capacity = field(default_factory=Capacity)  # what its siblings' shares are of


@dataclass(frozen=True)
class OwnTest:
    """One look of the least-served queue's own walk (`fairshare._own_first`) past its blocked
    front: a later task starts if it borrows (its request on top of `usage` exceeds `nominal`),
    fits `budget`, and does not push back the start held for the front (`hold`, at `now`).
    The caller also runs it on the tasks past those it was given (`FairAdmission.unread`);
    the walk reads at most `more` of them (None: all)."""

    budget: Capacity
    usage: Capacity
    nominal: Capacity
    more: int | None
    hold: HeldRoom | None = None
    now: float = 0.0

    def lets_start(self, candidate: Candidate) -> bool:
        request = candidate.request
        if not request.fits_in(self.budget) or (self.usage + request).fits_in(self.nominal):
            return False
        return self.hold is None or self.hold.lets_past(candidate) or self._ends_before(candidate)

    def until(self, candidate: Candidate) -> float:
        """The latest `now` at which a task it lets start still starts: one let past only because
        it ends, by its timeout, before the front's reserved start, not once it would not."""
        if self.hold is None or self.hold.lets_past(candidate):
            return math.inf
        assert self.hold.shadow is not None
        return self.hold.shadow - candidate.timeout_seconds

    def _ends_before(self, candidate: Candidate) -> bool:
        timeout, shadow = candidate.timeout_seconds, self.hold.shadow if self.hold else None
        return shadow is not None and timeout > 0 and self.now + timeout <= shadow


@dataclass
class FairAdmission:
    start: list[str] = field(default_factory=list)  # in admission order, across queues
    waiting: dict[str, Waiting] = field(default_factory=dict)
    queues: dict[str, QueueState] = field(default_factory=dict)
    # Per queue, where its walk ended (as policies.Admission.tail): from this index of the
    # queue's waiting tasks (those not started, in its order) on, every one waits for the same
    # lack, whatever follows. A queue whose walk reached its end is not listed.
    tails: dict[str, WalkTail] = field(default_factory=dict)
    # The latest `now` at which this answer holds (a queue's own backfill: a task started
    # only because it ends before its front's reserved start is not once it would not).
    until: float = math.inf
    # Queues given in part (QueueDemand.cut) whose walk reached the end of what was given
    # without ending: their answer may differ with the rest, so the caller gives more.
    short: set[str] = field(default_factory=set)
    # Queues given in part whose own walk past their blocked front (`fairshare._own_first`)
    # read all it was given and found nothing: each test it made, for the caller to run on
    # the tasks past what was given (`OwnTest`). Only one that passes needs more given.
    unread: dict[str, list[OwnTest]] = field(default_factory=dict)
    # The room held for the least-served queue's blocked front when the pass ended (None: none
    # held): fair-share preemption by another queue may not take it either.
    held: HeldRoom | None = None


# What the least-served queue's front keeps for itself, by the policy of the pass.
STRICT_RESERVATION = "strict"
BACKFILL_RESERVATION = "backfill"
NO_RESERVATION = "none"
RESERVATION_OF_POLICY = {
    "strict": STRICT_RESERVATION,
    "backfill": BACKFILL_RESERVATION,
    "besteffort": NO_RESERVATION,
}


@dataclass(frozen=True)
class HeldRoom:
    """Resources kept for the least-served queue's front, and what may still be borrowed."""

    queue: str
    front: str
    spare: Capacity  # free now beyond the front's request (negative: none)
    shadow: float | None  # backfill: when the front is sure to fit
    extra: Capacity | None  # backfill: free at that time beyond the front's request

    def lets_past(self, candidate: Candidate) -> bool:
        """Whether the reservation lets `candidate`, of another queue, past: only with what
        fits beside the front, now or at its reserved start, whatever the clock. A run that only
        ends, by its timeout, before that start is held back too: timeouts bound runs from
        above, so the reserved start is late and the least-served queue's own runs end early;
        what was let in then pushed its front back. The
        room this keeps idle, the least-served queue's own smaller tasks take first when they
        fit beside the front or end before its reserved start (`fairshare._own_first`)."""
        if fits_needed(candidate.request, self.spare):
            return True
        return self.extra is not None and fits_needed(candidate.request, self.extra)


def fits_needed(request: Capacity, room: Capacity) -> bool:
    """Fits, counting only the resources it asks for (a blocked GPU does not stop CPU work)."""
    return all(of(request, r) <= of(room, r) + EPS for r in RESOURCES if of(request, r) > 0)
