"""Task spec files and status sidecars as the tests write and read them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from specs.folder.atomic import write_atomic


def task_doc(entrypoint: str = "echo hi", cpu: float = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": entrypoint, "resources": {"cpu": cpu}, **spec},
    }


def task_yaml(entrypoint: str = "echo hi", cpu: float = 1, **spec: Any) -> str:
    return yaml.safe_dump(task_doc(entrypoint, cpu, **spec), sort_keys=False)


def write_task(folder: Path, name: str, entrypoint: str = "echo hi", **spec: Any) -> Path:
    path = folder / f"{name}.yaml"
    write_atomic(path, task_yaml(entrypoint, **spec).encode())
    return path


def read_status(folder: Path, name: str) -> dict[str, Any]:
    """The status body of a sidecar, or {} if there is none (or it is unreadable)."""
    try:
        doc = yaml.safe_load((folder / f"{name}.status.yaml").read_text())
    except (FileNotFoundError, yaml.YAMLError):
        return {}
    return doc.get("status", {}) if isinstance(doc, dict) else {}


def snapshot(root: Path) -> dict[str, bytes]:
    """Every regular file under root by relative path, to prove what did (not) change."""
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_file():
                out[str(path.relative_to(root))] = path.read_bytes()
    return out
