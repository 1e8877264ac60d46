"""Reading the deployment files without a Docker engine or a Kubernetes cluster."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ray_pin() -> str:
    """The exact Ray version pyproject.toml pins (ray[default]==X)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        match = re.fullmatch(r"ray(\[[^\]]*\])?==([0-9.]+)", dep.replace(" ", ""))
        if match:
            return match.group(2)
    raise AssertionError("pyproject.toml does not pin ray with ==")


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    lines: list[str] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    result = []
    for line in lines:
        instruction, _, args = line.partition(" ")
        result.append((instruction.upper(), args.strip()))
    return result


def exec_form(args: str) -> list[str]:
    """ENTRYPOINT/CMD arguments: JSON exec form, or a shell string split like a shell."""
    if args.startswith("["):
        value = json.loads(args)
        assert isinstance(value, list)
        return [str(v) for v in value]
    return shlex.split(args)
