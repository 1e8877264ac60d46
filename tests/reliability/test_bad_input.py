"""Bad input: the spec parser fuzzed with hypothesis, YAML bombs and other nasty documents, and
filesystem traps in the tasks folder. Parsing yields a Task or our own SpecParseError, nothing
else; the loop never crashes, and never writes outside its folder."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import math
import os
import stat
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.app.logsetup import TextFormatter
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import FAILED, RUNNING, Capacity
from specs.folder.paths import read_with_stat
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from specs.task.records import Task
from specs.yamlio.parse import MAX_FILE_BYTES, SpecParseError, parse_task
from tests.support.specs import snapshot, task_doc
from tests.support.world import GIB, World

FUZZ = settings(
    max_examples=int(os.environ.get("RAYQUEUE_FUZZ_EXAMPLES", "1000")),
    deadline=None,
    database=None,  # no .hypothesis folder in the repository
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check_parse(data: str | bytes, figures: Counter[str], name: str = "task") -> Task | None:
    """The property: a Task, or SpecParseError with located messages; nothing else."""
    figures["inputs tried"] += 1
    figures["parser crashes"] += 0  # listed even when it stays 0
    try:
        task = parse_task(data, file=f"{name}.yaml", expected_name=name)
    except SpecParseError as exc:
        assert exc.errors and all(str(e).startswith(f"{name}.yaml") for e in exc.errors)
        return None
    except Exception:
        figures["parser crashes"] += 1
        raise
    assert isinstance(task, Task)
    # Whatever is accepted is sane: finite, non-negative, and hashable for the run identity.
    res = task.spec.resources
    assert all(math.isfinite(v) and v >= 0 for v in (res.cpu, res.gpu, float(res.memory)))
    assert 0 <= task.spec.priority <= 9 and math.isfinite(task.spec.timeout_seconds)
    assert len(task.spec_hash()) == 16
    return task


# --- strategies -------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1e308, -1e-308, 2**63, 10**30]),
)
texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["4Gi", "512Mi", "-1Gi", "1e400", "NaN", "inf", ".inf", "0x10", "1_000"]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=25,
)
yaml_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=12), st.integers()), inner, max_size=4),
    ),
    max_leaves=25,
)
FIELD_PATHS = [
    ("apiVersion",),
    ("kind",),
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec",),
    ("spec", "entrypoint"),
    ("spec", "runtimeEnv"),
    ("spec", "priority"),
    ("spec", "resources"),
    ("spec", "resources", "cpu"),
    ("spec", "resources", "gpu"),
    ("spec", "resources", "memory"),
    ("spec", "timeoutSeconds"),
    ("spec", "suspend"),
    ("spec", "submissionId"),
    ("spec", "maxLostRestarts"),
    ("spec", "priorty"),
    ("extra",),
]


def valid_doc() -> dict[str, Any]:
    doc = task_doc("python train.py", 1, priority=5, timeoutSeconds=60)
    doc["metadata"] = {"name": "task", "labels": {"team": "a"}}
    doc["spec"]["resources"]["memory"] = "4Gi"
    return doc


@st.composite
def mutated_specs(draw: st.DrawFn) -> dict[str, Any]:
    doc = valid_doc()
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(FIELD_PATHS))
        parent: Any = doc
        for key in path[:-1]:
            if not isinstance(parent, dict):
                break
            parent = parent.setdefault(key, {})
        if not isinstance(parent, dict):
            continue
        if draw(st.booleans()) and path[-1] in parent:
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(draw(yaml_values))
    return doc


def dump_yaml(value: Any) -> str:
    return yaml.safe_dump(value, allow_unicode=True, sort_keys=False)


# --- the parser, fuzzed ----------------------------------------------------------------------


@FUZZ
@given(value=yaml_values)
def test_fuzz_random_yaml(value: Any, figures: Counter[str]) -> None:
    check_parse(dump_yaml(value), figures)


@FUZZ
@given(value=json_values)
def test_fuzz_random_json(value: Any, figures: Counter[str]) -> None:
    check_parse(json.dumps(value), figures)


@FUZZ
@given(doc=mutated_specs())
def test_fuzz_mutated_valid_specs(doc: dict[str, Any], figures: Counter[str]) -> None:
    check_parse(dump_yaml(doc), figures)


@FUZZ
@given(data=st.binary(max_size=300), prefix=st.booleans())
def test_fuzz_bytes_and_non_utf8(data: bytes, prefix: bool, figures: Counter[str]) -> None:
    head = yaml.safe_dump(valid_doc()).encode() if prefix else b""
    check_parse(head + data, figures)


@FUZZ
@given(text=st.text(max_size=300))
def test_fuzz_arbitrary_text(text: str, figures: Counter[str]) -> None:
    check_parse(text, figures)


@FUZZ
@given(name=st.text(min_size=1, max_size=30))
def test_fuzz_unicode_names(name: str, figures: Counter[str]) -> None:
    doc = valid_doc()
    doc["metadata"]["name"] = name
    doc["metadata"]["labels"] = {name: name}
    task = check_parse(dump_yaml(doc), figures, name=name.replace("/", "_") or "x")
    if task is not None:
        assert task.metadata.name == name


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cpu", float("nan")),
        ("cpu", float("inf")),
        ("cpu", -1),
        ("gpu", -0.5),
        ("cpu", 10**400),
        ("memory", "-4Gi"),
        ("memory", "1e400"),
        ("memory", float("inf")),
    ],
)
def test_bad_numbers_are_refused(field: str, value: Any, figures: Counter[str]) -> None:
    doc = valid_doc()
    doc["spec"]["resources"][field] = value
    assert check_parse(dump_yaml(doc), figures) is None


# --- nasty documents ------------------------------------------------------------------------


def test_yaml_bomb_is_refused_quickly(figures: Counter[str]) -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    bomb = "\n".join(lines) + "\nspec: *a9\n"
    started = time.monotonic()
    with pytest.raises(SpecParseError, match="nodes once aliases are expanded"):
        parse_task(bomb, file="bomb.yaml")
    figures["inputs tried"] += 1
    assert time.monotonic() - started < 2


def test_duplicate_keys_name_both_lines(figures: Counter[str]) -> None:
    text = yaml.safe_dump(valid_doc(), sort_keys=False) + "spec: {}\n"
    with pytest.raises(SpecParseError, match=r'duplicate key "spec" \(lines \d+ and \d+\)'):
        parse_task(text, file="dup.yaml")
    figures["inputs tried"] += 1


def test_over_one_mib_is_refused_before_parsing(figures: Counter[str]) -> None:
    text = yaml.safe_dump(valid_doc()) + "#" + "x" * MAX_FILE_BYTES + "\n"
    with pytest.raises(SpecParseError, match="larger than the 1024 KiB limit"):
        parse_task(text.encode(), file="big.yaml")
    figures["inputs tried"] += 1


def test_multi_document_file_is_refused(figures: Counter[str]) -> None:
    one = yaml.safe_dump(valid_doc())
    with pytest.raises(SpecParseError, match="expected one document, found several"):
        parse_task(one + "---\n" + one, file="multi.yaml")
    figures["inputs tried"] += 1


# --- through the store and the loop: no crash, nothing written outside the folder ------------

# Names a team may choose to bend serve's log or the terminal: a newline and a forged log
# line, a carriage return, an escape sequence, Unicode's line separator.
HOSTILE_NAMES = [
    "y\n2026-12-07 17:00:00,000 INFO rayqueue.audit: deleted payroll by platform",
    "a\rb",
    "\x1b[2Jclear",
    "line\u2028break",
    "tab\there",
]
file_names = st.one_of(
    st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from(HOSTILE_NAMES),
)


@settings(FUZZ, max_examples=int(os.environ.get("RAYQUEUE_FUZZ_FOLDER_EXAMPLES", "150")))
@given(
    files=st.dictionaries(
        file_names,
        st.one_of(st.binary(max_size=200), mutated_specs().map(lambda d: dump_yaml(d).encode())),
        min_size=1,
        max_size=5,
    )
)
def test_fuzz_folder_through_the_loop(files: dict[str, bytes], figures: Counter[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tasks, outside = root / "tasks", root / "outside"
        tasks.mkdir()
        outside.mkdir()
        (outside / "precious.yaml").write_text("do not touch\n")
        before = snapshot(outside)
        for name, data in files.items():
            path = tasks / f"{name}.yaml"
            try:
                path.write_bytes(data)
            except OSError:  # a name the filesystem refuses (too long in bytes, ...)
                continue
        ray = FakeRay(Capacity(4, 0, 16 * GIB))
        settings_ = Settings(tasks_dir=tasks, queue_id="q-fuzz", api=False)
        reconciler = Reconciler(settings_, TaskStore(tasks), ray)
        reconciler.run_pass()
        reconciler.run_pass()
        figures["inputs tried"] += len(files)
        after = snapshot(outside)
        touched = sum(1 for k in set(before) | set(after) if before.get(k) != after.get(k))
        touched += sum(1 for p in root.iterdir() if p.name not in ("tasks", "outside"))
        figures["files touched outside the folder"] += touched
        assert touched == 0
        for path in tasks.rglob("*"):  # inside: only the specs, our sidecars and state
            rel = path.relative_to(tasks).as_posix()
            assert (
                rel.startswith(".rayqueue")
                or rel.endswith(".status.yaml")
                or rel.removesuffix(".yaml") in files
            ), rel


# --- hostile output: what a team's files and jobs make the loop write -------------------------

SIDECAR_MOST = 24 * 1024  # a status's caps together, for the statuses these inputs give


def test_hostile_names_rings_and_huge_lines_stay_bounded(
    make_world: Callable[..., World], figures: Counter[str]
) -> None:
    """A long dependency ring, names made to forge log lines, and a failed job whose log is
    one huge line: the loop goes on, no sidecar grows past the caps, no log line is forged."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    try:
        world = make_world(Capacity(16, 0, 64 * GIB))  # room for every named task to start
        ring = 300
        for i in range(ring):
            world.write(f"ring/m-{i:03}", dependsOn=[{"name": f"ring/m-{(i + 1) % ring:03}"}])
        for name in HOSTILE_NAMES:
            (world.tasks / f"{name}.yaml").write_text(yaml.safe_dump(task_doc("echo hi")))
        world.write("noisy", "python noisy.py")
        world.step(2)
        sid = str(world.status("noisy")["submissionId"])
        world.ray.set_logs(sid, "x" * (8 << 20) + "\n" + "y" * (4 << 20))
        world.ray.set_status(sid, FAILED)
        world.step(2)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    figures["inputs tried"] += ring + len(HOSTILE_NAMES) + 1
    assert world.status("noisy")["phase"] == "Failed"
    assert world.status("ring/m-000")["reason"] == "DependencyCycle"
    sizes = {p.name: p.stat().st_size for p in world.tasks.rglob("*.status.yaml")}
    assert len(sizes) >= ring + 1
    assert max(sizes.values()) <= SIDECAR_MOST, max(sizes.items(), key=lambda kv: kv[1])
    text = out.getvalue()
    assert "y\\n2026" in text, text  # the name went through the log, escaped
    forged = [line for line in text.splitlines() if "rayqueue.audit" in line[:60]]
    assert forged == [], forged


# --- filesystem traps -------------------------------------------------------------------------


def test_symlink_outside_the_folder_is_ignored_with_a_warning(
    make_world: Callable[..., World], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "evil.yaml").write_text(yaml.safe_dump(task_doc("cat /etc/shadow")))
    world = make_world()
    (world.tasks / "evil.yaml").symlink_to(secret / "evil.yaml")
    (world.tasks / "dir").symlink_to(secret)
    (world.tasks / "zero.yaml").symlink_to("/dev/zero")
    with caplog.at_level(logging.WARNING, "rayqueue.store"):
        world.step()
    assert world.ray.submitted == [] and not list(secret.glob("*.status.yaml"))
    assert caplog.text.count("symlink points outside the folder; ignored") == 3


def test_fifo_and_device_files_are_skipped_without_blocking(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    os.mkfifo(world.tasks / "pipe.yaml")
    # Without CAP_MKNOD there is no device file; the FIFO still covers "not a regular file".
    with contextlib.suppress(PermissionError):
        os.mknod(world.tasks / "null.yaml", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    world.write("fine", "python fine.py")
    done = threading.Event()
    thread = threading.Thread(target=lambda: (world.step(), done.set()), daemon=True)
    thread.start()
    assert done.wait(10), "a pass blocked on a FIFO"
    assert [r.metadata["rayqueue.task"] for r in world.ray.submitted] == ["fine"]
    assert not (world.tasks / "pipe.status.yaml").exists()


def test_unreadable_spec_keeps_its_running_job(
    make_world: Callable[..., World], caplog: pytest.LogCaptureFixture
) -> None:
    """Tests run as root, where chmod 000 blocks nothing, so the read itself is made to fail
    with EACCES, exactly as the store would see it for another user's file."""
    denying: list[bool] = []

    def read_file(path: str | Path, limit: int = -1) -> tuple[bytes, os.stat_result] | None:
        """How the store reads a file (and stats it after); train.yaml denied once armed."""
        if denying and str(path).endswith("train.yaml"):
            raise PermissionError(13, "Permission denied", str(path))
        return read_with_stat(path, limit)

    world = make_world(store_options={"read_file": read_file})
    world.write("train", "python train.py")
    world.step()
    sid = world.status("train")["submissionId"]
    world.ray.set_status(sid, RUNNING)
    world.step()
    denying.append(True)
    os.utime(world.tasks / "train.yaml", (time.time() + 5, time.time() + 5))  # force a re-read
    with caplog.at_level(logging.WARNING, "rayqueue.store"):
        world.step(passes=3)
    assert "Permission denied" in caplog.text
    assert world.ray.calls["stop"] == 0 and world.ray.jobs[sid].status == RUNNING
    assert world.status("train")["phase"] == "Running"


def test_names_with_spaces_and_non_ascii(make_world: Callable[..., World]) -> None:
    world = make_world()
    names = ["my task", "träning", "日本語/ジョブ", "emoji 🚀"]
    for name in names:
        (world.tasks / name).parent.mkdir(parents=True, exist_ok=True)
        world.write(name, "python train.py", resources={"cpu": 0.5})
    world.step()
    submitted = {r.metadata["rayqueue.task"]: r.submission_id for r in world.ray.submitted}
    assert set(submitted) == set(names)
    for name, sid in submitted.items():
        assert world.status(name)["submissionId"] == sid
        assert sid.isascii() and " " not in sid and "/" not in sid
    assert len(set(submitted.values())) == len(names)


def test_an_unforeseen_parser_failure_is_still_our_error(
    monkeypatch: pytest.MonkeyPatch, figures: Counter[str]
) -> None:
    """The fuzz finds no exception the parser does not handle itself, so the catch-all at its
    boundary is checked directly: a bug deep inside must still come out as SpecParseError."""
    import specs.yamlio.parse

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("a bug deep inside")

    monkeypatch.setattr(specs.yamlio.parse, "_validate", broken)
    monkeypatch.setattr(specs.yamlio.parse.blockyaml, "load", broken)  # the fast paths, tried first
    monkeypatch.setattr(specs.yamlio.parse.fastyaml, "load", broken)
    with pytest.raises(SpecParseError, match="could not parse: KeyError"):
        parse_task(yaml.safe_dump(valid_doc()), file="task.yaml")
    figures["inputs tried"] += 1
