"""A clock the test moves by hand, for the code that takes `clock: Callable[[], float]`."""

from __future__ import annotations

# An arbitrary instant in 2027: far from 0, so "seconds since" arithmetic is realistic.
DEFAULT_START = 1_800_000_000.0


class FakeClock:
    """Unix seconds that stand still until `advance()` (or an assignment to `now`)."""

    def __init__(self, start: float = DEFAULT_START) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
