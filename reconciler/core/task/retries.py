"""Retries with backoff: when a finished run is tried again, after how long, and what it costs.

Pure: the planner hands in how a run ended and how many retries were used; nothing here reads
the clock or a file. Kubernetes Jobs (backoffLimit, a doubling delay, exit-code rules) and
Argo's retryStrategy are the models; the spelling is `spec.retry`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from specs.task.pipeline import RetrySpec


class Outcome(StrEnum):
    """How a run ended, as a retry policy names it in `on` (the values are the spec's words):
    the ends that are the run's own fault, or Ray's. Succeeded is never retried; Stopped is
    someone's decision, not an accident."""

    FAILED = "Failed"
    LOST = "Lost"
    TIMED_OUT = "TimedOut"


RETRYABLE_OUTCOMES = frozenset(Outcome)
DEFAULT_ON = frozenset({Outcome.FAILED, Outcome.LOST})


class Cause(StrEnum):
    """Why a run ended, beyond its outcome: a run lost in an outage may cost nothing. (A user's
    stop and a preemption never come here: the planner re-queues or ends those itself.)"""

    RUN = "Run"  # the job ended by itself in Ray (or vanished from a Ray that stayed up)
    OUTAGE = "Outage"  # vanished while Ray was unreachable (a head restart)


@dataclass(frozen=True)
class RetryPolicy:
    """The effective policy of one task (from `spec.retry`, or the deprecated `maxLostRestarts`)."""

    limit: int = 0  # retries after the first run; 0: none
    backoff_seconds: float = 10.0
    factor: float = 2.0
    max_backoff_seconds: float = 600.0
    on: frozenset[str] = DEFAULT_ON
    non_retryable_exit_codes: frozenset[int] = frozenset()
    # Under `spec.retry`, a run lost during an outage is Ray's fault and costs nothing. The
    # deprecated maxLostRestarts counted every lost run, and keeps doing so.
    free_outage_losses: bool = True

    def __post_init__(self) -> None:
        if self.limit < 0:
            raise ValueError("limit must be >= 0")
        if self.backoff_seconds < 0 or self.max_backoff_seconds < 0:
            raise ValueError("backoff delays must be >= 0")
        if not self.factor >= 1:  # also refuses NaN
            raise ValueError("factor must be >= 1")
        unknown = set(self.on) - RETRYABLE_OUTCOMES
        if unknown:
            raise ValueError(f"cannot retry on {sorted(unknown)}")

    def delay(self, retries_used: int) -> float:
        """Seconds to wait before the next retry: backoff x factor^used, capped.

        Computed in logarithms, so a factor of 10 at the 100th retry does not overflow.
        """
        if retries_used < 0:
            raise ValueError("retries_used must be >= 0")
        base, cap = self.backoff_seconds, self.max_backoff_seconds
        if base == 0:
            return 0.0
        if cap <= base:
            return cap
        if self.factor == 1 or retries_used * math.log(self.factor) < math.log(cap / base):
            try:
                return min(base * self.factor**retries_used, cap)
            except OverflowError:  # a subnormal base: factor**n alone exceeds a float
                return cap
        return cap

    def schedule(self) -> list[float]:
        """Every delay the policy can ask for, in order (for docs and `describe`)."""
        return [self.delay(n) for n in range(self.limit)]


NO_RETRY = RetryPolicy(limit=0)


def lost_only(max_lost_restarts: int) -> RetryPolicy:
    """`maxLostRestarts: N`, the deprecated spelling: N immediate re-queues of lost runs, each
    counted."""
    return RetryPolicy(
        limit=max_lost_restarts,
        backoff_seconds=0.0,
        on=frozenset({Outcome.LOST}),
        free_outage_losses=False,
    )


DEFAULT_LOST_RESTARTS = 1  # maxLostRestarts when neither it nor retry is given


def policy_for(retry: RetrySpec | None, max_lost_restarts: int | None) -> RetryPolicy:
    """The task's effective policy: `spec.retry` if given, else the deprecated Lost-only one."""
    if retry is None:
        return lost_only(DEFAULT_LOST_RESTARTS if max_lost_restarts is None else max_lost_restarts)
    return RetryPolicy(
        limit=retry.limit,
        backoff_seconds=retry.backoff_seconds,
        factor=retry.factor,
        max_backoff_seconds=retry.max_backoff_seconds,
        on=frozenset(retry.on),
        non_retryable_exit_codes=frozenset(retry.non_retryable_exit_codes),
    )


@dataclass(frozen=True)
class RunEnd:
    """How one run ended: its phase (Failed, Lost, TimedOut, ...), Ray's driver exit code if
    the driver ran to its end, and why it ended."""

    outcome: Outcome
    exit_code: int | None = None
    cause: Cause = Cause.RUN


class Verdict(StrEnum):
    RETRY = "Retry"  # a new run after the delay; uses one of the limit
    RETRY_FREE = "RetryFree"  # a new run; does not use the limit
    FINAL = "Final"  # the outcome stands (succeeded, not retried on, a user's stop)
    NON_RETRYABLE = "NonRetryableExitCode"  # exited with a code the policy calls final
    EXHAUSTED = "BackoffLimitExceeded"  # would be retried, but the limit is used up


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    delay_seconds: float = 0.0
    retries: int = 0  # retries used once this decision is carried out

    @property
    def retried(self) -> bool:
        return self.verdict in (Verdict.RETRY, Verdict.RETRY_FREE)


def decide(policy: RetryPolicy, end: RunEnd, retries_used: int) -> Decision:
    """Is this finished run retried, after how long, and what is the count afterwards?"""
    if end.outcome not in policy.on:
        return Decision(Verdict.FINAL, retries=retries_used)
    if end.exit_code is not None and end.exit_code in policy.non_retryable_exit_codes:
        return Decision(Verdict.NON_RETRYABLE, retries=retries_used)
    if end.cause is Cause.OUTAGE and end.outcome == Outcome.LOST and policy.free_outage_losses:
        return Decision(Verdict.RETRY_FREE, retries=retries_used)
    if retries_used >= policy.limit:
        verdict = Verdict.EXHAUSTED if policy.limit > 0 else Verdict.FINAL
        return Decision(verdict, retries=retries_used)
    return Decision(Verdict.RETRY, policy.delay(retries_used), retries_used + 1)


def exhausted_message(end: RunEnd, runs: int, limit: int) -> str:
    """The words of a BackoffLimitExceeded status: the last exit code and the number of runs."""
    last = f"exit code {end.exit_code}" if end.exit_code is not None else "no exit code"
    noun = "run" if runs == 1 else "runs"
    return (
        f"{end.outcome.lower()} after {runs} {noun} (retry.limit {limit} reached); "
        f"last run: {end.outcome}, {last}"
    )


def non_retryable_message(end: RunEnd) -> str:
    return (
        f"{end.outcome.lower()} with exit code {end.exit_code}, which "
        "retry.nonRetryableExitCodes marks final; not retried"
    )


def backoff_message(end: RunEnd, retry: int, limit: int, delay: float) -> str:
    code = f" (exit code {end.exit_code})" if end.exit_code is not None else ""
    return f"run {end.outcome.lower()}{code}; retry {retry} of {limit} in {delay:g}s"


def is_due(next_retry_at: float | None, now: float) -> bool:
    """A retry waits until its time; one without a recorded time is due (old sidecars)."""
    return next_retry_at is None or now >= next_retry_at
