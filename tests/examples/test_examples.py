"""Every example spec validates (with our parser and with the JSON Schema an editor uses)."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
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
        "tasks/resumable.yaml",
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


def _train(tmp_path: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / "resumable" / "train.py")],
        env={**os.environ, "CHECKPOINT": str(tmp_path / "state.json"), **env},
        stdout=subprocess.PIPE,
        text=True,
    )


def test_resumable_example_saves_on_sigterm_and_resumes_when_preempted(tmp_path: Path) -> None:
    doc = yaml.safe_load((EXAMPLES / "tasks" / "resumable.yaml").read_text())
    assert doc["spec"]["resumable"] is True
    assert (ROOT / doc["spec"]["runtimeEnv"]["working_dir"] / "train.py").is_file()
    first = _train(tmp_path, STEPS="100000", STEP_SECONDS="0.01", RAYQUEUE_RUN="1")
    assert first.stdout is not None
    for line in first.stdout:  # wait for work to be done, not for a time
        if line.startswith("step 3 "):
            first.send_signal(signal.SIGTERM)
            break
    out = first.stdout.read()
    assert first.wait(timeout=60) == 143
    saved = json.loads((tmp_path / "state.json").read_text())["step"]
    assert saved >= 3 and f"SIGTERM: saved step {saved}" in out
    second = _train(tmp_path, STEPS=str(saved + 2), STEP_SECONDS="0", RAYQUEUE_PREEMPTED="1")
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 0
    assert f"resumed from step {saved}" in out and f"step {saved + 1} " in out and "done" in out
    fresh = _train(tmp_path, STEPS="1", STEP_SECONDS="0", RAYQUEUE_RUN="3")
    out, _ = fresh.communicate(timeout=60)
    assert "starting afresh" in out and "step 1 " in out  # not after a preemption: from 0


def test_the_legacy_example_names_a_working_dir_that_exists_here() -> None:
    # Run as written from the repository root, the task's script is found and it succeeds.
    tree = ast.parse((EXAMPLES / "http_client.py").read_text())
    body = next(ast.literal_eval(n) for n in ast.walk(tree) if isinstance(n, ast.Dict) and n.keys)
    script = body["entrypoint"].split()[-1]
    assert (ROOT / body["runtime_env"]["working_dir"] / script).is_file()
    for doc in ("README.md", "docs/api.md"):
        text = (ROOT / doc).read_text()
        assert '"runtime_env": {"working_dir": "examples/scheduler"}' in text
        assert '"entrypoint": "python test.py"' in text and "/home/ray/src" not in text
