"""`now` travels as epoch seconds inside a pass and as an aware datetime in statuses."""

from __future__ import annotations

from datetime import UTC, datetime


def to_datetime(now: float) -> datetime:
    return datetime.fromtimestamp(now, UTC)


def to_epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


EARLY = 1e-6  # seconds: a pass-wide edge is placed this much early, safe against float rounding
