"""Every example spec validates (with our parser and with the JSON Schema an editor uses)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reconciler.cli.files import Source, parse_source
from reconciler.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCHEMA = ROOT / "specs" / "task.schema.json"
# Not task specs: Kubernetes manifests (tests/deploy checks them) and the Prometheus scrape
# config (tests/examples/test_monitoring.py checks it).
NOT_SPECS = {"gitops", "monitoring"}
SPEC_FILES = sorted(
    p for p in EXAMPLES.rglob("*.y*ml") if not NOT_SPECS & set(p.relative_to(EXAMPLES).parts)
)
HEADER = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")


def test_there_are_examples() -> None:
    names = {p.relative_to(EXAMPLES).as_posix() for p in SPEC_FILES}
    for expected in (
        "tasks/hello.yaml",
        "tasks/priority-high.yaml",
        "tasks/priority-low.yaml",
        "tasks/timeout.yaml",
        "tasks/working-dir.yaml",
        "bundle.yaml",
    ):
        assert expected in names


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_example_validates(path: Path) -> None:
    tasks = parse_source(Source(str(path), path.read_bytes(), path.stem))
    assert tasks


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_example_points_editors_at_the_schema(path: Path) -> None:
    first = path.read_text().splitlines()[0]
    match = HEADER.match(first)
    assert match, f"{path} must start with a yaml-language-server $schema line"
    assert (path.parent / match.group(1)).resolve() == SCHEMA.resolve()


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_example_passes_the_json_schema(path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft7Validator(yaml.safe_load(SCHEMA.read_text()))
    for document in yaml.safe_load_all(path.read_text()):
        assert [e.message for e in validator.iter_errors(document)] == []


def test_tasks_folder_is_valid_as_the_reconciler_reads_it(capsys) -> None:
    assert main(["validate", str(EXAMPLES / "tasks")]) == 0
    assert capsys.readouterr().err == ""


def test_working_dir_example_points_into_the_repository() -> None:
    doc = yaml.safe_load((EXAMPLES / "tasks" / "working-dir.yaml").read_text())
    working_dir = doc["spec"]["runtimeEnv"]["working_dir"]
    # Relative to the repository root, where `rayqueue serve --dir examples/tasks` is run.
    assert (ROOT / working_dir / "test.py").is_file()
    assert doc["spec"]["entrypoint"] == "python test.py"


def test_old_test_job_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "scheduler" / "test.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "test job finished" in done.stdout


def test_old_http_client_example_keeps_the_old_request() -> None:
    tree = ast.parse((EXAMPLES / "http_client.py").read_text())
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert "http://127.0.0.1:8264/add_task" in strings
    assert {"name", "entrypoint", "runtime_env", "priority", "cpu", "gpu", "memory"} <= strings
