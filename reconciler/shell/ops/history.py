"""resource_history.jsonl: declared use against capacity over time, and its downsampling.

Writing: one line when what a line says changes (capacity, declared use, the counts, Ray's
availability), and otherwise one line per `heartbeat_seconds`, so a flat stretch still has points
and a gap in the file means the process was down. A busy loop makes ten passes a second, mostly
identical; they do not become ten lines.

Rotation: past `max_bytes` (Settings.history_max_bytes, 10 MiB) the file becomes `.1`, `.1`
becomes `.2` and `.2` becomes `.3`; `.3` is dropped. Four files at most are kept, and the reader
reads all of them, oldest first.

Reading: the series is a step function (a line holds until the next one, but at most
`max_hold_seconds`, beyond which the process counts as down). `downsample` cuts a window into
equal time buckets and gives, per bucket, the time-weighted mean and the maximum of each value,
so a week of lines reaches the browser as a few hundred points.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

KEEP = 3  # rotated files kept beside the live one
HEARTBEAT_SECONDS = 60.0
WINDOWS: Mapping[str, float] = {"1h": 3600.0, "1d": 86400.0, "1w": 7 * 86400.0}
DEFAULT_BUCKETS = 240
SERIES = ("cpu", "gpu", "memory", "cap_cpu", "cap_gpu", "cap_memory", "queued", "running")


class ResourceHistory:
    """Appends lines, deduplicated, with size-based rotation."""

    def __init__(
        self, path: Path, max_bytes: int, *, heartbeat_seconds: float = HEARTBEAT_SECONDS
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.heartbeat_seconds = heartbeat_seconds
        self._last: dict[str, Any] | None = None
        self._last_at = -math.inf

    def record(self, now: float, record: Mapping[str, Any]) -> bool:
        """Append `record` (without its time) if it differs from the last line or the heartbeat
        is due. Returns whether a line was written. `now` is Unix seconds."""
        content = dict(record)
        content.pop("time", None)
        if content == self._last and now - self._last_at < self.heartbeat_seconds:
            return False
        stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
        self.append({"time": stamp, **content})
        self._last, self._last_at = content, now
        return True

    def append(self, record: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, separators=(",", ":"), sort_keys=True) + "\n"
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size and size + len(line) > self.max_bytes:
            self._rotate()
        # O_APPEND keeps each line whole even if another reader tails the file.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def _rotate(self) -> None:
        for index in range(KEEP - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{index + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))


# -- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One history line: Unix seconds and the values of SERIES (None: unknown, e.g. Ray down)."""

    time: float
    values: tuple[float | None, ...]


def parse_line(line: str) -> Point | None:
    """A history line as a Point; None for a line that is torn, foreign or unparsable."""
    try:
        data = json.loads(line)
        when = datetime.fromisoformat(data["time"]).timestamp()
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(data, dict):
        return None
    used = _mapping(data.get("used"))
    cap = _mapping(data.get("capacity"))

    def num(source: Mapping[str, Any], key: str) -> float | None:
        value = source.get(key)
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )

    values = (
        num(used, "cpu"),
        num(used, "gpu"),
        num(used, "memory"),
        num(cap, "cpu"),
        num(cap, "gpu"),
        num(cap, "memory"),
        num(data, "queued"),
        num(data, "running"),
    )
    return Point(when, values)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def history_files(path: Path) -> list[Path]:
    """The live file and its rotated predecessors, oldest first."""
    older = [path.with_name(f"{path.name}.{index}") for index in range(KEEP, 0, -1)]
    return [p for p in [*older, path] if p.exists()]


class HistoryReader:
    """Reads the history files, keeping what it parsed: rotated files never change, and the
    live one only grows, so a refresh parses only the lines appended since the last one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: dict[Path, tuple[tuple[int, int], int, list[Point]]] = {}

    def points(self, since: float = -math.inf) -> list[Point]:
        out: list[Point] = []
        seen: set[Path] = set()
        for file in history_files(self.path):
            seen.add(file)
            out.extend(p for p in self._read(file) if p.time >= since)
        for gone in set(self._cache) - seen:
            del self._cache[gone]
        out.sort(key=lambda p: p.time)
        return out

    def _read(self, file: Path) -> list[Point]:
        try:
            st = file.stat()
        except FileNotFoundError:
            return []
        identity = (st.st_dev, st.st_ino)
        cached = self._cache.get(file)
        offset, points = (0, []) if cached is None or cached[0] != identity else cached[1:]
        if st.st_size < offset:  # truncated under us: start over
            offset, points = 0, []
        if st.st_size > offset:
            with file.open("rb") as fh:
                fh.seek(offset)
                chunk = fh.read(st.st_size - offset)
            # Only whole lines: a line being written is read on the next refresh.
            end = chunk.rfind(b"\n") + 1
            points = points + [
                p
                for raw in chunk[:end].decode(errors="replace").splitlines()
                if (p := parse_line(raw)) is not None
            ]
            offset += end
        self._cache[file] = (identity, offset, points)
        return points


@dataclass(frozen=True)
class Bucket:
    start: float
    mean: tuple[float | None, ...]
    max: tuple[float | None, ...]


def downsample(
    points: Sequence[Point],
    start: float,
    end: float,
    buckets: int = DEFAULT_BUCKETS,
    *,
    max_hold_seconds: float = 2.5 * HEARTBEAT_SECONDS,
) -> list[Bucket]:
    """Cut [start, end) into `buckets` equal buckets; per bucket and series, the time-weighted
    mean and the maximum of the step function the points describe. A bucket no point covers
    has None. Pure: the same points give the same buckets."""
    if buckets <= 0 or end <= start:
        return []
    width = (end - start) / buckets
    n = len(SERIES)
    weight = [[0.0] * n for _ in range(buckets)]
    total = [[0.0] * n for _ in range(buckets)]
    peak: list[list[float | None]] = [[None] * n for _ in range(buckets)]
    for index, point in enumerate(points):
        until = points[index + 1].time if index + 1 < len(points) else end
        seg_start = max(point.time, start)
        seg_end = min(until, point.time + max_hold_seconds, end)
        if seg_end <= seg_start:
            continue
        first = int((seg_start - start) // width)
        last = min(math.ceil((seg_end - start) / width) - 1, buckets - 1)
        for b in range(max(first, 0), last + 1):
            b_start = start + b * width
            overlap = min(seg_end, b_start + width) - max(seg_start, b_start)
            if overlap <= 0:
                continue
            for s, value in enumerate(point.values):
                if value is None:
                    continue
                weight[b][s] += overlap
                total[b][s] += value * overlap
                current = peak[b][s]
                peak[b][s] = value if current is None else max(current, value)
    return [
        Bucket(
            start + b * width,
            tuple(total[b][s] / weight[b][s] if weight[b][s] > 0 else None for s in range(n)),
            tuple(peak[b]),
        )
        for b in range(buckets)
    ]


def series_json(buckets: Iterable[Bucket]) -> dict[str, Any]:
    """Column-wise JSON for the web view: times, then mean and max per series."""
    rows = list(buckets)
    out: dict[str, Any] = {"time": [round(b.start, 3) for b in rows], "mean": {}, "max": {}}
    for s, name in enumerate(SERIES):
        out["mean"][name] = [_round(b.mean[s]) for b in rows]
        out["max"][name] = [_round(b.max[s]) for b in rows]
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class HistoryView:
    """The downsampled series of a window, as the web view asks for them; a result is reused for
    `ttl_seconds`, so several open browsers cost one downsampling."""

    def __init__(
        self,
        path: Path,
        *,
        buckets: int = DEFAULT_BUCKETS,
        ttl_seconds: float = 5.0,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ):
        self.reader = HistoryReader(path)
        self.buckets = buckets
        self.ttl_seconds = ttl_seconds
        # A line holds until the next one, but no longer than a missed heartbeat or two:
        # beyond that the writer was not running, and the plot shows a gap.
        self.max_hold_seconds = 2.5 * heartbeat_seconds
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}

    def window(self, name: str, now: float) -> dict[str, Any]:
        """Series for window `name` ("1h", "1d", "1w") ending at `now`. KeyError if unknown."""
        span = WINDOWS[name]
        cached = self._cache.get(name)
        if cached is not None and 0 <= now - cached[0] < self.ttl_seconds:
            return cached[1]
        start = now - span
        hold = self.max_hold_seconds
        # Lines from before the window still hold at its start, for up to `hold` seconds.
        points = self.reader.points(since=start - hold)
        result = {
            "window": name,
            "start": start,
            "end": now,
            **series_json(downsample(points, start, now, self.buckets, max_hold_seconds=hold)),
        }
        self._cache[name] = (now, result)
        return result
