"""examples/gitops: the manifests parse and fit together, and the rayqueue args are valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli.main import build_parser
from tests.deploy.conftest import ROOT

GITOPS = ROOT / "examples" / "gitops"


@pytest.fixture(scope="module")
def manifests() -> dict[str, dict[str, Any]]:
    by_kind: dict[str, dict[str, Any]] = {}
    for path in sorted(GITOPS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["apiVersion"] and doc["kind"], path
            assert doc["kind"] not in by_kind, f"two {doc['kind']}s"
            by_kind[doc["kind"]] = doc
    return by_kind


def test_kustomization_lists_every_manifest(manifests) -> None:
    listed = set(manifests["Kustomization"]["resources"])
    files = {p.name for p in GITOPS.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == files


def pod(manifests) -> dict[str, Any]:
    return manifests["Deployment"]["spec"]["template"]["spec"]


def container(manifests, name: str) -> dict[str, Any]:
    return next(c for c in pod(manifests)["containers"] if c["name"] == name)


def test_one_replica_never_overlapping(manifests) -> None:
    spec = manifests["Deployment"]["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"]["type"] == "Recreate"
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert manifests["Service"]["spec"]["selector"].items() <= labels.items()


def test_rayqueue_args(manifests) -> None:
    rq = container(manifests, "rayqueue")
    argv = [*rq["command"], *rq["args"]]
    assert argv[:2] == ["rayqueue", "serve"]
    args = build_parser().parse_args(argv[1:])
    assert str(args.dir) == "/git/repo/tasks"
    assert str(args.status_dir) == "/status"
    assert args.address.startswith("http://") and args.address.endswith("-head-svc:8265")
    assert args.host == "0.0.0.0"
    # The state (resource history, lock) is kept with the statuses, not in the checkout.
    assert str(args.state_dir).startswith("/status/")


def test_git_sync_feeds_the_tasks_folder(manifests) -> None:
    rq_args = build_parser().parse_args(
        [*container(manifests, "rayqueue")["command"], *container(manifests, "rayqueue")["args"]][
            1:
        ]
    )
    syncers = [container(manifests, "git-sync"), *pod(manifests)["initContainers"]]
    for sync in syncers:
        flags = dict(a.removeprefix("--").split("=", 1) for a in sync["args"] if "=" in a)
        assert sync["image"].startswith("registry.k8s.io/git-sync/git-sync:v4")
        link = f"{flags['root']}/{flags['link']}"
        assert str(rq_args.dir).startswith(link + "/")
        mounts = {m["name"]: m["mountPath"] for m in sync["volumeMounts"]}
        assert mounts["git"] == flags["root"]
    assert "--one-time" in pod(manifests)["initContainers"][0]["args"]


def test_volumes(manifests) -> None:
    volumes = {v["name"]: v for v in pod(manifests)["volumes"]}
    assert "emptyDir" in volumes["git"]
    claim = volumes["status"]["persistentVolumeClaim"]["claimName"]
    assert claim == manifests["PersistentVolumeClaim"]["metadata"]["name"]
    mounts = {m["name"]: m for m in container(manifests, "rayqueue")["volumeMounts"]}
    assert mounts["git"]["mountPath"] == "/git" and mounts["git"]["readOnly"] is True
    assert mounts["status"]["mountPath"] == "/status"
    for c in [*pod(manifests)["containers"], *pod(manifests)["initContainers"]]:
        for mount in c.get("volumeMounts", []):
            assert mount["name"] in volumes


def test_probes_and_service_port(manifests) -> None:
    rq = container(manifests, "rayqueue")
    args = build_parser().parse_args([*rq["command"], *rq["args"]][1:])
    (port,) = rq["ports"]
    assert port["containerPort"] == args.port == 8264
    local = [{"name": "Host", "value": "localhost"}]  # an allowed Host, not the pod's IP
    assert rq["livenessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": port["name"],
        "httpHeaders": local,
    }
    assert rq["readinessProbe"]["httpGet"] == {
        "path": "/readyz",
        "port": port["name"],
        "httpHeaders": local,
    }
    (service_port,) = manifests["Service"]["spec"]["ports"]
    assert service_port["port"] == 8264
    assert service_port["targetPort"] == port["name"]


def test_probe_paths_exist_in_the_api() -> None:
    from api.app import create_app
    from specs.settings.process import Settings

    app = create_app(Settings(tasks_dir=ROOT / "examples" / "tasks"))
    assert {"/healthz", "/readyz"} <= set(app.openapi()["paths"])


def test_probes_pass_the_host_check_without_a_token(tmp_path: Path) -> None:
    from api.app import create_app
    from specs.settings.process import Settings
    from tests.api.conftest import TestClient  # imported there without Starlette's warning

    settings = Settings(
        tasks_dir=tmp_path, host="0.0.0.0", api_token="t0k3n-0123456789abcdef-0123456789"
    )
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 503  # answered: no loop in this process
        assert client.get("/healthz", headers={"Host": "10.0.0.7:8264"}).status_code == 400


def test_the_api_token_comes_from_a_secret(manifests) -> None:
    rq = container(manifests, "rayqueue")
    args = build_parser().parse_args([*rq["command"], *rq["args"]][1:])
    # Neither the retired flag nor its variable turns the token check off.
    assert getattr(args, "insecure_no_auth", False) is False
    env = {e["name"]: e.get("value") for e in rq.get("env", [])}
    assert env.get("RAYQUEUE_INSECURE_NO_AUTH", "false") == "false"
    volumes = {v["name"]: v for v in pod(manifests)["volumes"]}
    mount = next(m for m in rq["volumeMounts"] if str(args.token_file).startswith(m["mountPath"]))
    assert mount["readOnly"] is True
    secret = volumes[mount["name"]]["secret"]
    assert secret["secretName"] == "rayqueue-api-token"
    # The one-liner that makes the Secret is documented next to the manifests.
    assert "kubectl create secret generic rayqueue-api-token" in (GITOPS / "README.md").read_text()
    assert "rayqueue" in args.allowed_hosts  # the Service's name, as clients call it


def test_network_policy_keeps_the_dashboard_for_rayqueue(manifests) -> None:
    policy = manifests["NetworkPolicy"]["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    head = policy["podSelector"]["matchLabels"]
    assert head["ray.io/node-type"] == "head"
    rq_labels = manifests["Deployment"]["spec"]["template"]["metadata"]["labels"]
    rq_args = container(manifests, "rayqueue")["args"]
    cluster = head["ray.io/cluster"]
    assert any(a.startswith(f"http://{cluster}-head-svc:") for a in rq_args)
    # Who may reach port 8265: rayqueue, and the cluster's own pods; no rule without `from`.
    dashboard_sources = []
    for rule in policy["ingress"]:
        assert rule.get("from"), "a rule without `from` admits every pod"
        ports = {p["port"] for p in rule.get("ports", [])}
        if not ports or 8265 in ports:
            for source in rule["from"]:
                assert set(source) == {"podSelector"}, "no namespace or IP block is allowed in"
                dashboard_sources.append(source["podSelector"]["matchLabels"])
    assert {"app.kubernetes.io/name": "rayqueue"} in dashboard_sources
    for labels in dashboard_sources:
        assert labels.items() <= rq_labels.items() or labels == {"ray.io/cluster": cluster}
