"""The retry policy on its own: the backoff schedule, what is retried and what it costs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.core.task.retries import (
    NO_RETRY,
    Cause,
    RetryPolicy,
    RunEnd,
    Verdict,
    backoff_message,
    decide,
    exhausted_message,
    is_due,
    lost_only,
    policy_for,
)
from specs.task.models import Reason
from specs.task.pipeline import RetrySpec

DEFAULTS = RetryPolicy(limit=3, backoff_seconds=10, factor=2, max_backoff_seconds=600)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (DEFAULTS, [10, 20, 40]),
        (RetryPolicy(limit=8, backoff_seconds=10, factor=2, max_backoff_seconds=100),
         [10, 20, 40, 80, 100, 100, 100, 100]),
        (RetryPolicy(limit=3, backoff_seconds=5, factor=1), [5, 5, 5]),
        (RetryPolicy(limit=2, backoff_seconds=0, factor=3), [0, 0]),
        (RetryPolicy(limit=2, backoff_seconds=30, max_backoff_seconds=20), [20, 20]),
        (RetryPolicy(limit=0), []),
    ],
)  # fmt: skip
def test_backoff_schedule(policy: RetryPolicy, expected: list[float]) -> None:
    assert policy.schedule() == expected


def test_huge_retry_counts_do_not_overflow() -> None:
    policy = RetryPolicy(limit=100, backoff_seconds=10, factor=100, max_backoff_seconds=3600)
    assert policy.delay(10_000) == 3600
    assert policy.delay(1) == 1000


@given(
    base=st.floats(0, 1e4),
    factor=st.floats(1, 100),
    cap=st.floats(0, 1e6),
    n=st.integers(0, 500),
)
def test_delay_is_capped_and_never_shrinks(base: float, factor: float, cap: float, n: int) -> None:
    policy = RetryPolicy(limit=1, backoff_seconds=base, factor=factor, max_backoff_seconds=cap)
    d, next_d = policy.delay(n), policy.delay(n + 1)
    assert 0 <= d <= cap
    assert math.isfinite(d)
    assert next_d >= d


FAILED_1 = RunEnd("Failed", exit_code=1)


@pytest.mark.parametrize(
    ("policy", "end", "used", "verdict", "delay", "after"),
    [
        # The first three failures are retried after 10, 20, 40 s; the fourth is final.
        (DEFAULTS, FAILED_1, 0, Verdict.RETRY, 10, 1),
        (DEFAULTS, FAILED_1, 1, Verdict.RETRY, 20, 2),
        (DEFAULTS, FAILED_1, 2, Verdict.RETRY, 40, 3),
        (DEFAULTS, FAILED_1, 3, Verdict.EXHAUSTED, 0, 3),
        # A limit of 0 retries nothing and is not "exceeded": the failure stands as it is.
        (NO_RETRY, FAILED_1, 0, Verdict.FINAL, 0, 0),
        # Non-retryable exit codes are final, even with retries left.
        (RetryPolicy(limit=3, non_retryable_exit_codes=frozenset({2})),
         RunEnd("Failed", 2), 0, Verdict.NON_RETRYABLE, 0, 0),
        (RetryPolicy(limit=3, non_retryable_exit_codes=frozenset({2})),
         RunEnd("Failed", 3), 0, Verdict.RETRY, 10, 1),
        # No exit code (Ray could not start the driver): never matches a non-retryable code.
        (RetryPolicy(limit=3, non_retryable_exit_codes=frozenset({2})),
         RunEnd("Failed", None), 0, Verdict.RETRY, 10, 1),
        # Only outcomes listed in `on` are retried.
        (DEFAULTS, RunEnd("TimedOut"), 0, Verdict.FINAL, 0, 0),
        (RetryPolicy(limit=1, on=frozenset({"TimedOut"})), RunEnd("TimedOut"), 0,
         Verdict.RETRY, 10, 1),
        (RetryPolicy(limit=1, on=frozenset({"Lost"})), FAILED_1, 0, Verdict.FINAL, 0, 0),
        (DEFAULTS, RunEnd("Succeeded", 0), 0, Verdict.FINAL, 0, 0),
        (DEFAULTS, RunEnd("Stopped"), 0, Verdict.FINAL, 0, 0),
        # What never counts: runs lost in an outage.
        (DEFAULTS, RunEnd("Lost", cause=Cause.OUTAGE), 3, Verdict.RETRY_FREE, 0, 3),
        # ... but only when Lost is retried at all.
        (RetryPolicy(limit=3, on=frozenset({"Failed"})), RunEnd("Lost", cause=Cause.OUTAGE),
         0, Verdict.FINAL, 0, 0),
        # A run that vanished while Ray stayed up does count.
        (DEFAULTS, RunEnd("Lost"), 0, Verdict.RETRY, 10, 1),
        (DEFAULTS, RunEnd("Lost"), 3, Verdict.EXHAUSTED, 0, 3),
        # maxLostRestarts: N, the deprecated spelling: N immediate, counted re-queues of lost
        # runs (also after an outage), and nothing else.
        (lost_only(1), RunEnd("Lost", cause=Cause.OUTAGE), 0, Verdict.RETRY, 0, 1),
        (lost_only(1), RunEnd("Lost", cause=Cause.OUTAGE), 1, Verdict.EXHAUSTED, 0, 1),
        (lost_only(1), FAILED_1, 0, Verdict.FINAL, 0, 0),
        (lost_only(0), RunEnd("Lost"), 0, Verdict.FINAL, 0, 0),
    ],
)  # fmt: skip
def test_decide(
    policy: RetryPolicy, end: RunEnd, used: int, verdict: Verdict, delay: float, after: int
) -> None:
    decision = decide(policy, end, used)
    assert decision.verdict is verdict
    assert decision.delay_seconds == delay
    assert decision.retries == after
    assert decision.retried == (verdict in (Verdict.RETRY, Verdict.RETRY_FREE))


def test_policy_for_maps_the_spec_and_the_deprecated_field() -> None:
    spec = RetrySpec.model_validate(
        {"limit": 3, "backoffSeconds": 2, "on": ["Failed"], "nonRetryableExitCodes": [2, 3]}
    )
    policy = policy_for(spec, max_lost_restarts=5)
    assert policy == RetryPolicy(
        limit=3,
        backoff_seconds=2,
        factor=2,
        max_backoff_seconds=600,
        on=frozenset({"Failed"}),
        non_retryable_exit_codes=frozenset({2, 3}),
    )
    assert policy_for(None, max_lost_restarts=2) == lost_only(2)
    assert lost_only(2).on == {"Lost"} and lost_only(2).free_outage_losses is False
    # The spec's defaults are the issue's: 10 s doubling up to 600 s, on Failed and Lost.
    default = policy_for(RetrySpec(limit=3), 0)
    assert default.schedule() == [10, 20, 40] and default.on == {"Failed", "Lost"}


@pytest.mark.parametrize(
    "kwargs",
    [{"limit": -1}, {"factor": 0.5}, {"factor": math.nan}, {"backoff_seconds": -1},
     {"on": frozenset({"Succeeded"})}],
)  # fmt: skip
def test_policy_refuses_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_messages_name_the_exit_code_and_runs() -> None:
    message = exhausted_message(RunEnd("Failed", 1), runs=3, limit=2)
    assert "3 runs" in message and "exit code 1" in message and "limit 2" in message
    assert "no exit code" in exhausted_message(RunEnd("Lost"), runs=2, limit=1)
    assert backoff_message(FAILED_1, 2, 3, 20) == "run failed (exit code 1); retry 2 of 3 in 20s"
    assert Reason.BACKOFF_LIMIT_EXCEEDED == Verdict.EXHAUSTED.value == "BackoffLimitExceeded"


@pytest.mark.parametrize(
    ("next_retry_at", "now", "due"), [(None, 5.0, True), (10.0, 9.999, False), (10.0, 10.0, True)]
)
def test_is_due(next_retry_at: float | None, now: float, due: bool) -> None:
    assert is_due(next_retry_at, now) is due
