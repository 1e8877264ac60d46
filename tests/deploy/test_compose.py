"""docker-compose.yml: the old stack's shape, agreeing with the CLI's defaults and our pins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli.main import build_parser
from specs.settings import DEFAULT_PORT
from tests.deploy.conftest import ROOT, dockerfile, exec_form, ray_pin

DASHBOARD_PORT = 8265


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return compose["services"]


def ports(service: dict[str, Any]) -> list[tuple[int, int]]:
    result = []
    for entry in service.get("ports", []):
        host, container = str(entry).split(":")[-2:]
        result.append((int(host), int(container)))
    return result


def test_head_is_a_ray_head_with_the_dashboard(services: dict[str, Any]) -> None:
    head = services["head"]
    assert head["image"] == f"rayproject/ray:{ray_pin()}-py311"
    command = head["command"].split()
    assert command[:3] == ["ray", "start", "--head"]
    assert "--block" in command  # keeps the container alive
    assert "--dashboard-host=0.0.0.0" in command
    assert f"--dashboard-port={DASHBOARD_PORT}" in command
    assert (DASHBOARD_PORT, DASHBOARD_PORT) in ports(head)
    assert f":{DASHBOARD_PORT}/" in " ".join(head["healthcheck"]["test"])


def test_scheduler_is_rayqueue_serve_on_the_old_port(services: dict[str, Any]) -> None:
    scheduler = services["scheduler"]
    assert scheduler["build"] == "."
    assert scheduler["depends_on"]["head"]["condition"] == "service_healthy"
    assert (DEFAULT_PORT, DEFAULT_PORT) in ports(scheduler)
    assert scheduler["environment"]["RAY_DASHBOARD_ADDRESS"] == f"http://head:{DASHBOARD_PORT}"
    assert "./tasks:/tasks" in scheduler["volumes"]
    # The command is the image's entry point; compose must not override it.
    assert "entrypoint" not in scheduler and "command" not in scheduler
    entrypoint = exec_form(next(a for i, a in dockerfile() if i == "ENTRYPOINT"))
    args = build_parser().parse_args(entrypoint[1:])
    assert (args.command, str(args.dir), args.host) == ("serve", "/tasks", "0.0.0.0")
    assert args.port == DEFAULT_PORT  # the port compose publishes


def test_examples_service_applies_the_examples(services: dict[str, Any]) -> None:
    examples = services["examples"]
    assert examples["image"] == services["scheduler"]["image"]
    assert examples["depends_on"]["scheduler"]["condition"] == "service_healthy"
    assert "./tasks:/tasks" in examples["volumes"]
    argv = examples["entrypoint"]
    assert argv[0] == "rayqueue"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "apply" and str(args.dir) == "/tasks"
    for source in args.filename:  # relative to the image's WORKDIR, a copy of the repository
        assert (ROOT / source).is_dir()
        assert "examples" in Path(source).parts


def test_users_can_write_the_mounted_folder(services: dict[str, Any]) -> None:
    for name in ("scheduler", "examples"):
        assert services[name]["user"] == "${RAYQUEUE_UID:-1000}:${RAYQUEUE_GID:-100}"
