"""Resource history: one line per change or heartbeat, rotation, and the downsampler."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.shell.ops.history import (
    SERIES,
    HistoryReader,
    HistoryView,
    Point,
    ResourceHistory,
    downsample,
    history_files,
    parse_line,
)

CPU = SERIES.index("cpu")
QUEUED = SERIES.index("queued")


def record(cpu: float, queued: int = 0) -> dict[str, object]:
    return {
        "ray_available": True,
        "capacity": {"cpu": 4.0, "gpu": 0.0, "memory": 8.0},
        "used": {"cpu": cpu, "gpu": 0.0, "memory": 0.0},
        "queued": queued,
        "starting": 0,
        "running": 1,
    }


def test_identical_passes_write_one_line_until_the_heartbeat(tmp_path: Path) -> None:
    history = ResourceHistory(tmp_path / "h.jsonl", 10**6, heartbeat_seconds=60)
    written = [history.record(1000 + i * 0.1, record(1.0)) for i in range(100)]
    assert written.count(True) == 1  # ten seconds of a busy loop, nothing changed
    assert history.record(1061, record(1.0))  # heartbeat due
    assert history.record(1061.1, record(2.0))  # a change is written at once
    lines = (tmp_path / "h.jsonl").read_text().splitlines()
    assert [json.loads(line)["used"]["cpu"] for line in lines] == [1.0, 1.0, 2.0]
    assert json.loads(lines[0])["time"] == "1970-01-01T00:16:40.000+00:00"


def test_rotation_keeps_three_old_files_and_the_reader_reads_them_in_order(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history = ResourceHistory(path, 400, heartbeat_seconds=60)
    for i in range(40):
        history.record(1000.0 + i, record(float(i)))
    files = history_files(path)
    assert [f.name for f in files] == ["h.jsonl.3", "h.jsonl.2", "h.jsonl.1", "h.jsonl"]
    assert all(f.stat().st_size <= 400 for f in files)
    points = HistoryReader(path).points()
    cpus = [p.values[CPU] for p in points]
    assert cpus == sorted(cpus) and cpus[-1] == 39.0
    assert len(cpus) < 40  # the oldest lines went with the fourth rotation


def test_reader_parses_only_appended_lines_and_skips_torn_ones(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history = ResourceHistory(path, 10**6)
    reader = HistoryReader(path)
    history.record(1000, record(1.0))
    assert len(reader.points()) == 1
    with path.open("a") as fh:
        fh.write("not json\n")
        fh.write('{"time": "1970-01-01T00:16:50+00:00", "used": {"cpu": 3}')  # no newline yet
    assert [p.values[CPU] for p in reader.points()] == [1.0]
    with path.open("a") as fh:
        fh.write("}\n")
    assert [p.values[CPU] for p in reader.points()] == [1.0, 3.0]


def test_parse_line_keeps_unknowns_as_none() -> None:
    line = '{"time": "2026-01-01T00:00:00+00:00", "capacity": null, "used": {"cpu": 2}}'
    point = parse_line(line)
    assert point is not None
    assert point.values[CPU] == 2.0 and point.values[SERIES.index("cap_cpu")] is None
    assert parse_line('{"used": {}}') is None
    assert parse_line("[1, 2]") is None


def test_downsample_weights_by_time_and_takes_the_maximum() -> None:
    # cpu 1 for 30 s, then 3 for 30 s: one bucket of 60 s has mean 2 and max 3.
    points = [Point(0, (1.0,) * len(SERIES)), Point(30, (3.0,) * len(SERIES))]
    (bucket,) = downsample(points, 0, 60, 1, max_hold_seconds=1000)
    assert bucket.mean[CPU] == pytest.approx(2.0)
    assert bucket.max[CPU] == 3.0


def test_downsample_leaves_gaps_where_the_process_was_down() -> None:
    points = [Point(0, (1.0,) * len(SERIES)), Point(500, (2.0,) * len(SERIES))]
    buckets = downsample(points, 0, 600, 6, max_hold_seconds=150)
    assert [b.mean[CPU] for b in buckets] == [1.0, 1.0, None, None, None, 2.0]


def test_a_week_at_one_line_a_second_reaches_the_browser_as_240_points() -> None:
    week = 7 * 86400
    points = [Point(float(t), (float(t % 7),) * len(SERIES)) for t in range(0, week, 60)]
    buckets = downsample(points, 0, week, 240)
    assert len(buckets) == 240
    assert all(b.max[CPU] == 6.0 for b in buckets)


values = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@given(
    st.lists(st.tuples(st.floats(min_value=0, max_value=1000), values), min_size=1, max_size=40),
    st.integers(min_value=1, max_value=50),
)
def test_downsample_mean_lies_between_min_and_max(raw: list[tuple[float, float]], n: int) -> None:
    raw = sorted(raw)
    points = [Point(t, (v,) * len(SERIES)) for t, v in raw]
    low, high = min(v for _, v in raw), max(v for _, v in raw)
    for bucket in downsample(points, 0, 1000, n, max_hold_seconds=math.inf):
        if bucket.mean[CPU] is None:
            continue
        assert low - 1e-6 * high <= bucket.mean[CPU] <= bucket.max[CPU] * (1 + 1e-9) + 1e-9
        assert bucket.max[CPU] <= high


def test_view_answers_a_window_and_reuses_it_briefly(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history = ResourceHistory(path, 10**6)
    for i in range(10):
        history.record(10_000 + i * 60, record(float(i), queued=i))
    view = HistoryView(path, buckets=12, ttl_seconds=5)
    series = view.window("1h", 10_600)
    assert len(series["time"]) == 12
    assert max(v for v in series["max"]["queued"] if v is not None) == 9
    history.record(10_601, record(100.0))
    assert view.window("1h", 10_602) is series  # within the TTL
    assert view.window("1h", 10_700)["max"]["cpu"][-1] == 100.0
    with pytest.raises(KeyError):
        view.window("1y", 10_700)
