"""examples/gitops/autoscaling: the KubeRay variant with the in-tree autoscaler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.cli.main import build_parser
from reconciler.shell.raycluster.autoscaler import gcs_address_for
from specs.queues.parse import parse_queue_config
from tests.deploy.conftest import ROOT

VARIANT = ROOT / "examples" / "gitops" / "autoscaling"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _rayqueue_args() -> Any:
    deployment = _load(ROOT / "examples" / "gitops" / "deployment.yaml")
    rq = next(
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "rayqueue"
    )
    return build_parser().parse_args([*rq["command"], *rq["args"]][1:])


def test_the_variant_adds_an_autoscaling_raycluster_to_the_base() -> None:
    kustomization = _load(VARIANT / "kustomization.yaml")
    assert kustomization["resources"] == ["../", "raycluster.yaml"]
    cluster = _load(VARIANT / "raycluster.yaml")
    assert cluster["kind"] == "RayCluster" and cluster["spec"]["enableInTreeAutoscaling"] is True
    # rayqueue's --address is this cluster's head service, and the GCS it derives is too.
    address = _rayqueue_args().address
    assert address == f"http://{cluster['metadata']['name']}-head-svc:8265"
    assert gcs_address_for(address, None) == f"{cluster['metadata']['name']}-head-svc:6379"
    ports = {
        p["containerPort"]
        for c in cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
        for p in c["ports"]
    }
    assert {6379, 8265} <= ports


def test_rayqueue_may_reach_the_gcs() -> None:
    patch = _load(VARIANT / "networkpolicy-gcs.yaml")
    base = _load(ROOT / "examples" / "gitops" / "networkpolicy.yaml")
    # The rule it extends is the one that lets the rayqueue pod in.
    assert base["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "rayqueue"
    }
    assert patch == [
        {"op": "add", "path": "/spec/ingress/0/ports/-", "value": {"protocol": "TCP", "port": 6379}}
    ]


def test_the_ceiling_matches_the_worker_groups() -> None:
    config = parse_queue_config((VARIANT / "queues-cluster.yaml").read_text())
    section = config.spec.cluster
    assert section is not None
    kinds = {k.name: k for k in section.node_type_values()}
    groups = _load(VARIANT / "raycluster.yaml")["spec"]["workerGroupSpecs"]
    for group in groups:
        kind = kinds[group["groupName"]]
        assert kind.max_count == group["maxReplicas"]
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert kind.resources.cpu == float(limits["cpu"])
        assert kind.resources.gpu == float(limits.get("nvidia.com/gpu", 0))
