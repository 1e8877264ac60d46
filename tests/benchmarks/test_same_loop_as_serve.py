"""The benchmarks measure the loop `rayqueue serve` runs: same settings, store and wiring."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks import common, history, latency, scale
from reconciler.app import assembly, daemon
from reconciler.shell.loop.faults import Faults
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.settings.process import Settings


def served_loop(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Reconciler:
    """The reconciler the daemon's own start-up builds for `settings` (Ray faked)."""
    monkeypatch.setattr(
        "reconciler.shell.raycluster.adapter.RayJobsAdapter",
        lambda *args, **kwargs: FakeRay(Capacity(4, 0, 2**34)),
    )
    # The address given below (so that no head is started) would also attach Ray's
    # autoscaler, which a private head never has, nor the benchmarks' fake Ray.
    monkeypatch.setattr("reconciler.app.daemon.autoscaler_for", lambda *args, **kwargs: None)
    stop = threading.Event()
    running = daemon._Running()
    try:
        _ray, reconciler, _address = daemon._start(
            replace(settings, address="http://fake:8265"),
            Faults(),
            stop,
            running,
        )
    finally:
        stop.set()
        for thread in running.threads:
            thread.join(10)
    return reconciler


def comparable(reconciler: Reconciler) -> dict[str, Any]:
    described = assembly.describe(reconciler)
    # The daemon is given an address so that it starts no Ray head; nothing else differs.
    described["settings"] = replace(described["settings"], address=None)
    return described


def test_benchmark_settings_are_what_serve_parses(tmp_path: Path) -> None:
    settings = common.serve_settings(tmp_path, "--queue-id", "q")
    defaults = Settings(tasks_dir=tmp_path, queue_id="q", api=False)
    assert settings == defaults
    assert settings.settle_seconds == Settings.__dataclass_fields__["settle_seconds"].default


def test_every_benchmark_builds_the_loop_serve_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    built: list[Reconciler] = []
    constructed: list[Reconciler] = []
    real_serve_loop = common.serve_loop
    real_init = Reconciler.__init__

    def spy(*args: Any, **kwargs: Any) -> Reconciler:
        reconciler = real_serve_loop(*args, **kwargs)
        built.append(reconciler)
        return reconciler

    def counting_init(self: Reconciler, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        constructed.append(self)

    monkeypatch.setattr(common, "serve_loop", spy)
    monkeypatch.setattr(Reconciler, "__init__", counting_init)
    scale.main(["--sizes", "20", "--serve-window", "0", "--out", str(tmp_path / "s.json")])
    history.main(["--history", "0", "--out", str(tmp_path / "h.json")])
    latency.main(["--drops", "2", "--real-drops", "0", "--out", str(tmp_path / "l.json")])
    capsys.readouterr()
    assert built, "the benchmarks built no loop through serve_loop"
    # No benchmark builds a Reconciler of its own beside the shared path.
    assert [id(r) for r in constructed] == [id(r) for r in built]
    for reconciler in built:
        settings = reconciler.settings
        assert comparable(reconciler) == comparable(served_loop(settings, monkeypatch))


def test_a_diverging_store_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above would see a benchmark that built its store without settle time."""
    settings = common.serve_settings(tmp_path, "--queue-id", "q")
    ours = common.serve_loop(settings, FakeRay(Capacity(4, 0, 2**34)))
    ours.store.settle_seconds = 0.0
    assert comparable(ours) != comparable(served_loop(settings, monkeypatch))
