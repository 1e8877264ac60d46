"""Right-sizing against a real Ray head, wired as serve wires it: a task declaring 2 CPUs
whose driver holds 1 (an actor kept busy) ends; its run record says what it held and used,
and `rayqueue suggest` and `describe` suggest 1 CPU."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.app.assembly import build_reconciler, start_loop
from reconciler.cli.main import main
from reconciler.shell.ops.runhistory import FILE_NAME
from specs.tenancy.access import Tokens
from tests.integration.conftest import Queue

pytestmark = pytest.mark.ray

HALF = """
import os, sys, time, ray
ray.init()
@ray.remote(num_cpus=1)
class Spinner:
    def spin(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            pass
        return 1
spinner = Spinner.remote()
print("HOLDING", flush=True)
while not os.path.exists(sys.argv[1]):  # until the test has seen enough
    ray.get(spinner.spin.remote(0.5))
"""


def records(queue: Queue) -> list[dict[str, object]]:
    path = queue.dir / ".rayqueue" / FILE_NAME
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_that_holds_half_its_declaration_is_recorded_and_sized_down(
    make_queue: Callable[..., Queue],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    q = make_queue(census_seconds=1)
    script = tmp_path / "half.py"
    script.write_text(HALF)
    done = tmp_path / "done"
    entrypoint = f"{sys.executable} {script} {done}"
    q.write("half", {"entrypoint": entrypoint, "resources": {"cpu": 2}})
    q.reconciler = build_reconciler(q.settings, q.ray, tokens=Tokens())
    q.stop_event = threading.Event()
    threads = start_loop(q.reconciler, q.stop_event)
    q.thread = threads.loop
    ledger = q.reconciler.report.ledger
    assert ledger is not None

    def seen_enough() -> bool:
        # Three censuses, and the dashboard's process data (refreshed there every few
        # seconds) with the busy actor in it.
        live = list(ledger.live.values())
        return bool(live) and all(
            r.use.polls >= 3 and (r.use.peak_memory or 0) > 0 and (r.use.last_cores or 0) > 0
            for r in live
        )

    try:
        q.wait_phase("half", {"Running"}, timeout=90)
        q.wait_for(seen_enough, "three censuses of the run, with its processes", 60)
        done.touch()
        q.wait_phase("half", {"Succeeded"}, timeout=60)
        q.wait_for(lambda: records(q), "the run's record in the run history", 30)
    finally:
        q.halt()
        threads.join(10)

    (line,) = records(q)
    assert line["task"] == "half" and line["run"] == 1 and line["outcome"] == "SUCCEEDED"
    assert line["declared"] == {"cpu": 2.0, "gpu": 0.0, "memory": 0}
    peak, mean = line["peak"], line["mean"]
    assert isinstance(peak, dict) and isinstance(mean, dict)
    assert peak["cpu"] == 1.0 and 0 < mean["cpu"] <= 1.0  # the actor, held all along
    polls = line["polls"]
    assert isinstance(polls, int) and polls >= 3 and line["lowerBound"] is False
    # Physical use: the actor's worker process and the driver, from the dashboard.
    memory, efficiency = line["peakMemory"], line["cpuEfficiency"]
    assert isinstance(memory, float) and memory > 0
    assert isinstance(efficiency, float) and 0 < efficiency < 0.9  # one busy core of two

    capsys.readouterr()
    spec = (q.dir / "half.yaml").read_text()
    assert main(["suggest", "half", "--dir", str(q.dir)]) == 0
    out = capsys.readouterr().out
    assert "-    cpu: 2\n" in out and "+    cpu: 1\n" in out
    assert (q.dir / "half.yaml").read_text() == spec
    assert main(["describe", "half", "--dir", str(q.dir)]) == 0
    described = capsys.readouterr().out
    assert "Suggested resources: cpu 1, gpu 0, memory " in described
    assert "Last run use:       run 1: held peak 1 CPU" in described
