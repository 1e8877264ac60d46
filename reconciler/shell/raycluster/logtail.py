"""Reading the end of a job's log within TailLimits, for the real adapter and the fake alike.

Ray reads a log's last N lines for us (its state API, `lines=N`), but a line has no length
limit: one line of a hundred megabytes is one line. So each read stops at a budget of bytes,
and when the last N lines do not fit in it, fewer are asked for (half as many each time,
down to one); the one line that alone overflows the budget is kept as far as it was read,
marked as cut. Either way no read carries more than the budget, and the log is never read
whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from specs.cluster import TailLimits


@dataclass(frozen=True)
class LogRead:
    """What one read of a log's last lines gave: at most its budget of bytes, and whether
    that is all of those lines (`whole`) or the read stopped at the budget."""

    data: bytes
    whole: bool


# Reads the last `lines` lines of a log, at most `budget` bytes of them.
ReadLastLines = Callable[[int, int], LogRead]


def read_tail(read: ReadLastLines, limits: TailLimits) -> str:
    """The tail of a log within `limits`, by as few bounded reads as fit it."""
    lines = limits.lines
    if lines <= 0:
        return ""
    while True:
        got = read(lines, limits.read_budget)
        if got.whole or lines == 1:
            return limits.shape(got.data.decode("utf-8", "replace"), whole=got.whole)
        lines = max(1, lines // 2)


def last_lines(data: bytes, lines: int) -> bytes:
    """The last `lines` lines of `data` as Ray's log agent finds them (a last line without
    its newline counts as a line): what the fake gives for a read, as the real one would."""
    if lines <= 0:
        return b""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(lines):
        end = data.rfind(b"\n", 0, end)
        if end < 0:
            return data
    return data[end + 1 :]
