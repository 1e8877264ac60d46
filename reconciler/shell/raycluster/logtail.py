"""Reading the end of a job's log within TailLimits, for the real adapter and the fake alike.

Ray reads a log's last N lines for us (its state API, `lines=N`), but a line has no length
limit: one line of a hundred megabytes is one line. So each read stops at a budget of bytes,
and when the last N lines do not fit in it, fewer are asked for (half as many each time,
then bisecting), and the tail then starts with a line saying earlier lines were cut; the one
line that alone overflows the budget is kept as far as it was read, marked as cut. Either
way no read carries more than the budget, and the log is never read whole.
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
    """The tail of a log within `limits`: the most of its last lines whose read fits the
    budget, found by halving the count from `limits.lines`, then bisecting between a count
    that fits and one that does not."""
    if limits.lines <= 0:
        return ""
    lines = limits.lines
    fits: tuple[int, LogRead] | None = None  # the most lines read whole so far
    over: int | None = None  # the fewest lines whose read overflowed the budget
    while True:
        got = read(lines, limits.read_budget)
        if got.whole:
            fits = (lines, got)
        else:
            over = lines
        if over is None:
            break  # every line asked for fit
        if fits is None:
            if lines == 1:  # the last line alone overflows: kept as far as it was read
                return limits.shape(got.data.decode("utf-8", "replace"), whole=False)
            lines = max(1, lines // 2)
            continue
        if over - fits[0] <= 1:
            break
        lines = (fits[0] + over) // 2
    assert fits is not None
    # Some earlier line was left out for its size when a read of more lines overflowed.
    text = fits[1].data.decode("utf-8", "replace")
    return limits.shape(text, earlier_cut=over is not None)


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
