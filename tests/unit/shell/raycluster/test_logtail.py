"""The end of a log within TailLimits: few reads, each within its budget, lines cut, the
earliest dropped first; the fake's reads find the last lines as Ray's log agent does."""

from __future__ import annotations

import pytest

from reconciler.shell.raycluster.logtail import LogRead, last_lines, read_tail
from specs.cluster import CUT_MARK, EARLIER_CUT, TailLimits

LIMITS = TailLimits(lines=50, max_bytes=16 * 1024, line_bytes=2 * 1024)


def _reader(log: bytes, reads: list[tuple[int, int]]) -> object:
    def read(lines: int, budget: int) -> LogRead:
        found = last_lines(log, lines)
        reads.append((lines, min(len(found), budget)))
        return LogRead(found[:budget], len(found) <= budget)

    return read


@pytest.mark.parametrize(
    ("log", "tail"),
    [
        (b"", ""),
        (b"one\n", "one"),
        (b"a\nb\nc", "a\nb\nc"),  # a last line without its newline is a line
        (
            b"".join(b"line %d\n" % i for i in range(200)),
            "\n".join(f"line {i}" for i in range(150, 200)),
        ),
        (b"x" * (1 << 20) + b"\nthe\nend\n", EARLIER_CUT + "\nthe\nend"),
        (b"start\n" + b"y" * (1 << 20), "y" * (2048 - len(CUT_MARK)) + CUT_MARK),
    ],
)
def test_the_tail_of_a_log(log: bytes, tail: str) -> None:
    reads: list[tuple[int, int]] = []
    assert read_tail(_reader(log, reads), LIMITS) == tail  # type: ignore[arg-type]
    assert len(reads) <= 12  # halving from 50 lines, then bisecting
    assert all(size <= LIMITS.read_budget for _, size in reads)


def test_long_lines_are_cut_and_the_earliest_dropped_to_fit() -> None:
    log = b"".join(bytes([65 + i]) * 5000 + b"\n" for i in range(12))
    tail = read_tail(_reader(log, []), LIMITS)  # type: ignore[arg-type]
    lines = tail.split("\n")
    assert all(len(line) <= LIMITS.line_bytes and line.endswith(CUT_MARK) for line in lines)
    assert len(tail.encode()) <= LIMITS.max_bytes
    assert lines[-1].startswith("L")  # the last line is kept; the earliest went first


def test_no_lines_asked_for_reads_nothing() -> None:
    reads: list[tuple[int, int]] = []
    limits = TailLimits(lines=0, max_bytes=100, line_bytes=10)
    assert read_tail(_reader(b"a\n", reads), limits) == ""  # type: ignore[arg-type]
    assert reads == []


@pytest.mark.parametrize(
    ("data", "lines", "found"),
    [(b"a\nb\n", 1, b"b\n"), (b"a\nb", 1, b"b"), (b"a\nb\n", 5, b"a\nb\n"), (b"a\n\n", 1, b"\n")],
)
def test_last_lines_as_rays_agent_finds_them(data: bytes, lines: int, found: bytes) -> None:
    assert last_lines(data, lines) == found
