"""The sample `rayqueue get` output of the README and docs/cli.md is what the code prints for
`examples/tasks` after its first passes on a 2-CPU machine: the block cannot drift from the
examples (a task added) or from the table (a column, a message)."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from reconciler.cli.main import main
from specs.cluster import Capacity
from tests.support.world import World

ROOT = Path(__file__).resolve().parents[2]
HEADER = "NAME                PRIORITY   PHASE"


def _rows(text: str) -> list[list[str]]:
    """The table's cells without AGE (a clock) and with a run's submission id's hash masked."""
    rows = []
    for line in text.splitlines():
        cells = re.split(r" {2,}", re.sub(r"rq-(\S+)-[0-9a-f]{8}-", r"rq-\1-#-", line.strip()))
        rows.append(cells[:7] + cells[8:])
    return rows


def _block(path: Path) -> str:
    text = path.read_text()
    start = text.index(HEADER)
    return text[start : text.index("```", start)]


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_the_sample_get_output_is_what_get_prints(
    doc: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("RAY_DASHBOARD_ADDRESS", "RAY_ADDRESS", "RAYQUEUE_DIR"):
        monkeypatch.delenv(var, raising=False)
    tasks = tmp_path / "tasks"
    shutil.copytree(ROOT / "examples" / "tasks", tasks)
    world = World.build(
        tasks,
        start=time.time(),
        tick=0.0,
        queue_id="readme",
        state_dir=tmp_path / "state",
        capacity=Capacity(2, 0, 8 * 2**30),
    )
    world.step()  # submits the first run
    world.step()  # sees its Ray job pending
    capsys.readouterr()
    assert main(["get", "--dir", str(tasks)]) == 0
    printed = capsys.readouterr().out
    assert _rows(printed) == _rows(_block(ROOT / doc))
