"""Two private Ray heads side by side, and a clean stop of one of them."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from reconciler.shell.raycluster.local_head import LocalRayError, LocalRayHead
from tests.support.ray_head import RAY_HEAD_CPUS


def answers(address: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{address}/api/version", timeout=5) as resp:
            return bool(json.loads(resp.read())["ray_version"])
    except OSError:
        return False


def live_members(pgid: int) -> list[int]:
    """Pids in the process group that are not zombies."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


@pytest.mark.ray
def test_two_heads_side_by_side(ray_head: str) -> None:
    from reconciler.shell.raycluster.adapter import RayJobsAdapter  # imports ray: only when it runs

    second = LocalRayHead()
    try:
        address = second.start(num_cpus=1, memory_bytes=2**30)
        pgid = second.pid
        temp_dir = second.temp_dir
        assert pgid is not None and temp_dir is not None
        assert address != ray_head
        assert answers(ray_head) and answers(address)
        assert RayJobsAdapter(ray_head).capacity().cpu == RAY_HEAD_CPUS
        assert RayJobsAdapter(address).capacity().cpu == 1
    finally:
        second.stop()
    assert live_members(pgid) == []
    assert not temp_dir.exists()
    assert not answers(address)
    second.stop()  # idempotent
    assert answers(ray_head)
    assert RayJobsAdapter(ray_head).capacity().cpu == RAY_HEAD_CPUS


def test_a_head_that_dies_at_start_reports_its_log_and_cleans_up(tmp_path: Path) -> None:
    fake_ray = tmp_path / "ray"
    fake_ray.write_text("#!/bin/sh\necho 'cannot bind: port in use (fake)'\nexit 3\n")
    fake_ray.chmod(0o755)
    head = LocalRayHead(ray_executable=str(fake_ray))
    with pytest.raises(LocalRayError, match=r"(?s)code 3.*port in use \(fake\)"):
        head.start(timeout_seconds=30)
    assert head.temp_dir is None and head.pid is None
    with pytest.raises(RuntimeError):
        _ = head.dashboard_address
