"""A real Ray autoscaler on loopback, for the autoscaling tests.

Ray's fake node provider (`fake_multinode`, enabled by RAY_FAKE_CLUSTER=1) makes the head's own
autoscaler launch "nodes" as extra raylets on this machine. Ray's AutoscalingCluster would
build such a cluster, but its start() runs `ray stop --force`, which kills every Ray on the
machine; so the config is written here and the head is a LocalRayHead (free loopback ports, its
own temp dir and process group, stopped by TERM then KILL of that group, never `ray stop`).

The head has no CPU, so nothing a task asks for fits on it; the one worker type has 1 CPU per
node and at most 2 nodes: what two shared cores can run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.shell.raycluster.local_head import LocalRayHead, find_ray_executable

WORKER_TYPE = "small"
WORKER_CPUS = 1
MAX_WORKERS = 2
FAKE_HEAD_NODE_ID = "f" * 51 + "00000"  # ray...fake_multi_node.node_provider's, not imported
IDLE_TIMEOUT_SECONDS = 6  # short, so a drained queue's nodes go within the test


def cluster_config(gcs_address: str) -> dict[str, object]:
    """The autoscaler's cluster config: Ray's fake provider, pointed at this head's GCS (its
    default, the node's IP on port 6379, could be another cluster's)."""
    return {
        "cluster_name": "rq-fake",
        "max_workers": MAX_WORKERS,
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": IDLE_TIMEOUT_SECONDS / 60,
        "provider": {
            "type": "fake_multinode",
            "gcs_address": gcs_address,
            # As Ray's own fake-cluster config: several nodes share one IP, nodes need no
            # setup over SSH, and a node's launch config is never checked.
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
        },
        "auth": {"ssh_user": "ray"},
        "head_node_type": "ray.head.default",
        "available_node_types": {
            "ray.head.default": {"resources": {}, "node_config": {}, "max_workers": 0},
            WORKER_TYPE: {
                "resources": {"CPU": WORKER_CPUS},
                "node_config": {},
                "min_workers": 0,
                "max_workers": MAX_WORKERS,
            },
        },
        "file_mounts": {},
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }


def _write_config(temp_dir: Path, ports: Mapping[str, int]) -> Path:
    path = temp_dir / "autoscaling.json"
    path.write_text(json.dumps(cluster_config(f"127.0.0.1:{ports['port']}")))
    return path


@dataclass(frozen=True)
class AutoscalingHead:
    head: LocalRayHead
    dashboard: str
    gcs: str


def start_autoscaling_head() -> LocalRayHead:
    head = LocalRayHead()
    try:
        head.start(
            num_cpus=0,
            autoscaling_config=_write_config,
            env={
                "RAY_FAKE_CLUSTER": "1",
                "AUTOSCALER_UPDATE_INTERVAL_S": "1",
                # The fake provider knows the head by this id.
                "RAY_OVERRIDE_NODE_ID_FOR_TESTING": FAKE_HEAD_NODE_ID,
            },
        )
    except BaseException:
        head.stop(grace_seconds=2)
        raise
    return head


@pytest.fixture(scope="module")
def autoscaling_head(request: pytest.FixtureRequest) -> Iterator[AutoscalingHead]:
    """A head with no CPU whose autoscaler may add up to 2 one-CPU nodes; one per module."""
    if find_ray_executable() is None:
        pytest.skip("the `ray` executable is not installed")
    head = start_autoscaling_head()
    request.addfinalizer(head.stop)
    yield AutoscalingHead(head, head.dashboard_address, head.gcs_address)
