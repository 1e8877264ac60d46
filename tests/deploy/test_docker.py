"""The Dockerfile is correct by construction: Ray pin, user, health check, entry point."""

from __future__ import annotations

import re
import tomllib

from reconciler.cli.main import build_parser
from specs.settings.process import DEFAULT_PORT
from tests.deploy.conftest import ROOT, dockerfile, exec_form, ray_pin

ENTRYPOINT = ["rayqueue", "serve", "--dir", "/tasks", "--host", "0.0.0.0"]


def instructions(name: str) -> list[str]:
    return [args for instruction, args in dockerfile() if instruction == name]


def resolved_from() -> str:
    """The FROM image with ARG defaults substituted."""
    defaults = dict(arg.split("=", 1) for arg in instructions("ARG") if "=" in arg)
    image = instructions("FROM")[0].split()[0]
    return re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], image)


def test_based_on_the_official_ray_image_at_our_pin() -> None:
    assert len(instructions("FROM")) == 1
    image = resolved_from()
    assert image == f"rayproject/ray:{ray_pin()}-py311"
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11"  # the image's py311 satisfies it


def test_runs_as_the_images_non_root_user() -> None:
    users = instructions("USER")
    assert users and users[-1] == "ray"


def test_installs_rayqueue_from_the_copied_sources() -> None:
    copied = [args.split()[-2] for args in instructions("COPY")]
    sources = [s for args in instructions("COPY") for s in args.split()[1:-1]]
    assert any("pip install" in run and " ." in run for run in instructions("RUN"))
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for pattern in packages["packages"]["find"]["include"]:
        assert pattern.rstrip("*") in sources, f"package {pattern} is not copied"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY source {source} does not exist"
    assert copied  # something is copied at all
    assert "examples" in sources  # the working_dir example resolves in WORKDIR


def test_healthcheck_probes_healthz_on_the_default_port() -> None:
    (check,) = instructions("HEALTHCHECK")
    assert f"127.0.0.1:{DEFAULT_PORT}/healthz" in check
    assert instructions("EXPOSE") == [str(DEFAULT_PORT)]


def test_entrypoint_is_serve_on_tasks_and_parses() -> None:
    (entrypoint,) = instructions("ENTRYPOINT")
    argv = exec_form(entrypoint)
    assert argv == ENTRYPOINT
    args = build_parser().parse_args(argv[1:])
    assert args.command == "serve"
    assert (str(args.dir), args.host, args.port) == ("/tasks", "0.0.0.0", DEFAULT_PORT)
    assert exec_form(instructions("CMD")[0]) == []


def test_dockerignore_keeps_what_the_build_needs() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for needed in ("pyproject.toml", "README.md", "specs", "reconciler", "api", "examples"):
        assert needed not in ignored
