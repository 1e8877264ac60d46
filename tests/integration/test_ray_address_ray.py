"""A Ray address in each form Ray's job client takes, against a private real Ray head: the
GCS's host:port, the dashboard's URL, and `auto` through the head's own address file (Ray's
temp folder pointed at a copy of it, never at a system-wide one)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.app import daemon
from reconciler.app.assembly import autoscaler_for
from reconciler.cli.main import main
from reconciler.shell.raycluster.address import locate
from reconciler.shell.raycluster.local_head import LocalRayHead, find_ray_executable
from specs.settings.process import Settings
from tests.support.waiting import wait_until

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def head() -> Iterator[LocalRayHead]:
    if find_ray_executable() is None:
        pytest.skip("the `ray` executable is not installed")
    running = LocalRayHead()
    try:
        running.start(num_cpus=1)
        yield running
    finally:
        running.stop()


def _listed_through(dashboard: str) -> int:
    from reconciler.shell.raycluster.adapter import RayJobsAdapter

    adapter = RayJobsAdapter(dashboard, timeout_seconds=10)
    return len(adapter.list_jobs())


def test_the_gcs_address_leads_to_the_dashboard(head: LocalRayHead) -> None:
    located = locate(head.gcs_address, timeout_seconds=10)
    assert located.dashboard == head.dashboard_address
    assert located.gcs == head.gcs_address
    assert _listed_through(located.dashboard) >= 0


def test_the_dashboard_url_is_the_dashboard(head: LocalRayHead) -> None:
    located = locate(head.dashboard_address, timeout_seconds=10)
    assert located.dashboard == head.dashboard_address
    assert _listed_through(located.dashboard) >= 0


def test_auto_finds_the_head_its_address_file_names(
    head: LocalRayHead, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert head.temp_dir is not None
    record = head.temp_dir / "ray_current_cluster"  # written by `ray start` itself
    # `ray start` may be seen between creating the file and writing the address in it.
    wait_until(lambda: record.exists() and record.read_text().strip(), f"{record} written", 30)
    written = record.read_text()
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(written)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    located = locate("auto", timeout_seconds=10)
    assert located.dashboard == head.dashboard_address
    assert _listed_through(located.dashboard) >= 0


@pytest.mark.parametrize("form", ["gcs", "dashboard"])
def test_serve_locates_either_form_at_start(head: LocalRayHead, tmp_path: Path, form: str) -> None:
    given = head.gcs_address if form == "gcs" else head.dashboard_address
    settings = Settings(tasks_dir=tmp_path, address=given)
    located = daemon._locate_at_start(settings)
    assert located is not None and located.dashboard == head.dashboard_address
    if form == "gcs":  # the autoscaler's requests go to the GCS given, whatever its port
        autoscaler = autoscaler_for(settings, located.dashboard, located.gcs)
        assert autoscaler.gcs_address == head.gcs_address


def test_plan_takes_the_gcs_address(
    head: LocalRayHead, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "train.yaml").write_text(
        "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: echo hi\n"
    )
    queue_id = f"address-{uuid.uuid4().hex[:8]}"
    code = main(
        ["plan", "--dir", str(tasks), "--address", head.gcs_address, "--queue-id", queue_id]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "train" in out
