"""docker-compose.yml: the old stack's shape, agreeing with the CLI's defaults and our pins."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli.flags import settings_from_args
from reconciler.cli.main import build_parser
from specs.settings.process import DEFAULT_PORT, Settings
from specs.tenancy.access import AccessError, exposure_problem, load_tokens
from tests.deploy.conftest import ROOT, dockerfile, exec_form, ray_pin

DASHBOARD_PORT = 8265


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return compose["services"]


def published(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host address, host port, container port) of every published port; the address is
    "" when the entry names none (then Docker publishes on every interface)."""
    result = []
    for entry in service.get("ports", []):
        assert isinstance(entry, str), f"long-form port entries are not checked: {entry!r}"
        parts = entry.split(":")
        address = ":".join(parts[:-2])
        result.append((address, int(parts[-2]), int(parts[-1])))
    return result


def ports(service: dict[str, Any]) -> list[tuple[int, int]]:
    return [(host, container) for _, host, container in published(service)]


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
    # The image's entry point, with compose's command appended (the token file).
    assert "entrypoint" not in scheduler
    entrypoint = exec_form(next(a for i, a in dockerfile() if i == "ENTRYPOINT"))
    args = build_parser().parse_args([*entrypoint[1:], *scheduler["command"]])
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


# --- safe as shipped ----------------------------------------------------------------------------


def test_every_published_port_is_on_loopback_only(services: dict[str, Any]) -> None:
    # The Ray dashboard has no auth (ShadowRay, CVE-2023-48022); our API runs commands too.
    entries = [entry for service in services.values() for entry in published(service)]
    assert {(host, container) for _, host, container in entries} == {
        (DASHBOARD_PORT, DASHBOARD_PORT),
        (DEFAULT_PORT, DEFAULT_PORT),
    }
    for address, _, _ in entries:
        assert address == "127.0.0.1", entries


def scheduler_settings(services: dict[str, Any]) -> Settings:
    entrypoint = exec_form(next(a for i, a in dockerfile() if i == "ENTRYPOINT"))
    args = build_parser().parse_args([*entrypoint[1:], *services["scheduler"]["command"]])
    return settings_from_args(args)


def test_the_scheduler_reads_its_token_from_the_secret_file(services: dict[str, Any]) -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    (secret,) = services["scheduler"]["secrets"]
    source = Path(compose["secrets"][secret]["file"])
    settings = scheduler_settings(services)
    assert settings.token_file == Path("/run/secrets") / secret  # where compose mounts it
    # The file stays out of git and out of the image.
    assert source.parts[:2] == (".", "secrets") or source.parts[0] == "secrets"
    assert "secrets/" in (ROOT / ".gitignore").read_text().splitlines()
    assert "secrets" in (ROOT / ".dockerignore").read_text().splitlines()
    # The one-liner that makes it is in the file's header and in docs/deploy.md.
    header = (ROOT / "docker-compose.yml").read_text().split("\nname:")[0]
    assert f"> {source.as_posix().removeprefix('./')}" in header
    assert f"> {source.as_posix().removeprefix('./')}" in (ROOT / "docs" / "deploy.md").read_text()


def test_without_the_secret_file_the_scheduler_refuses_to_start(
    services: dict[str, Any], tmp_path: Path
) -> None:
    settings = scheduler_settings(services)
    assert settings.host == "0.0.0.0" and not settings.insecure_no_auth
    for missing in (tmp_path / "absent", tmp_path):  # no file, or the folder compose may make
        with pytest.raises(AccessError):
            load_tokens(dataclasses.replace(settings, token_file=missing), environ={})
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "empty").chmod(0o600)
    with pytest.raises(AccessError, match="empty"):
        load_tokens(dataclasses.replace(settings, token_file=tmp_path / "empty"), environ={})
    # And with no token at all, a 0.0.0.0 listener is refused outright.
    no_token = dataclasses.replace(settings, token_file=None)
    assert exposure_problem(no_token, load_tokens(no_token, environ={})) is not None
    (tmp_path / "token").write_text("t0k3n-0123456789abcdef-0123456789-xyz\n")
    (tmp_path / "token").chmod(0o600)
    with_token = dataclasses.replace(settings, token_file=tmp_path / "token")
    tokens = load_tokens(with_token, environ={})
    assert tokens.required and exposure_problem(with_token, tokens) is None


def test_the_dashboard_stays_reachable_inside_the_compose_network(
    services: dict[str, Any],
) -> None:
    # Bound to every interface inside the head's container (published on loopback only).
    assert "--dashboard-host=0.0.0.0" in services["head"]["command"].split()
    address = services["scheduler"]["environment"]["RAY_DASHBOARD_ADDRESS"]
    assert address == f"http://head:{DASHBOARD_PORT}"
