"""benchmarks.matrix runs the simulator's matrix command and writes its table and cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import matrix as bench
from reconciler.sim import matrix


def test_the_matrix_benchmark_writes_its_table_and_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(matrix, "SEED_SETS", {"tuning": (0,), "held-out": (10,)})
    out, table = tmp_path / "m.json", tmp_path / "m.md"
    argv = ["--shapes", "wide", "--jobs", "12", "--out", str(out), "--markdown", str(table)]
    assert bench.main(argv) == 0
    assert "| wide | 4 equal teams | **held-out** 10 |" in table.read_text()
    report = json.loads(out.read_text())
    assert report["jobs"] == 12 and len(report["cells"]) == 2 * len(matrix.CONFIGURATIONS)
    assert "| wide |" in capsys.readouterr().out
