"""`rayqueue suggest`: the resources the recorded runs suggest, as a unified diff of the
user's spec file (its comments and layout kept where the edit does not touch them), never
written; describe's `Last run use` and `Suggested resources` lines."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from reconciler.shell.ops.rightsize import GI, MI, RunIdentity, RunUse
from reconciler.shell.ops.runhistory import FILE_NAME, RunHistory
from specs.cluster import Capacity, Usage

SPEC = """\
# The nightly training run: keep this comment.
apiVersion: rayqueue/v1
kind: Task
spec:
  entrypoint: python train.py   # the driver
  priority: 3
  resources:
    cpu: 2
    memory: 8Gi
"""

ARRAY = """\
apiVersion: rayqueue/v1
kind: Task
spec:
  entrypoint: python sweep.py
  array: {values: [{lr: 1}, {lr: 2}]}
  resources: {cpu: 4}
"""


def record_runs(
    tasks: Path, task: str, runs: int, *, held: float = 1, rss: float = 900 * MI
) -> None:
    history = RunHistory(tasks / ".rayqueue" / FILE_NAME, 1 << 20)
    for run in range(1, runs + 1):
        use = RunUse()
        for at in (0, 15, 30, 45):
            use.observe(at, Capacity(held), Usage(cpu_percent=80, memory=rss), complete=True)
        identity = RunIdentity(
            task, run, f"s-{run}", "default", Capacity(2, 0, 8 * GI), "SUCCEEDED", 0
        )
        history.append(use.record(identity, ended_at=60))


def test_suggest_prints_the_change_as_a_diff_and_writes_nothing(rq, tasks: Path) -> None:
    (tasks / "team-a").mkdir()
    spec = tasks / "team-a" / "train.yaml"
    spec.write_text(SPEC)
    record_runs(tasks, "team-a/train", 2)

    result = rq("suggest", "team-a/train")
    assert result.code == 0, result.err
    assert spec.read_text() == SPEC  # never written
    assert result.out.startswith("--- a/team-a/train.yaml\n+++ b/team-a/train.yaml\n")
    changed = [
        line for line in result.out.splitlines() if line[:1] in "+-" and line[1:2] != line[:1]
    ]
    assert changed == ["-    cpu: 2", "-    memory: 8Gi", "+    cpu: 1", '+    memory: "1280Mi"']
    assert "   entrypoint: python train.py   # the driver\n" in result.out  # context, as it was
    assert "cpu 1, gpu 0, memory 1280Mi (from 2 runs, 8 polls)" in result.err
    # The diff applies as a patch to the file it names.
    patch = tasks / "resize.patch"
    patch.write_text(result.out)
    subprocess.run(["patch", "-p1", "-s", "-i", str(patch)], cwd=tasks, check=True)
    patched = spec.read_text()
    assert "    cpu: 1\n" in patched and patched.startswith("# The nightly training run")


def test_describe_shows_the_last_run_and_the_suggestion(rq, tasks: Path) -> None:
    (tasks / "train.yaml").write_text(SPEC)
    record_runs(tasks, "train", 1)
    out = rq("describe", "train").out
    assert "  Last run use:       run 1: held peak 1 CPU (mean 1) of 2 declared" in out
    assert "CPU efficiency 40%" in out and "4 polls" in out
    assert "  Suggested resources: cpu 1, gpu 0, memory 1280Mi (from 1 run, 4 polls)" in out
    assert "rayqueue suggest train shows the diff" in out


def test_too_few_polls_say_so_and_print_nothing(rq, tasks: Path) -> None:
    (tasks / "train.yaml").write_text(SPEC)
    history = RunHistory(tasks / ".rayqueue" / FILE_NAME, 1 << 20)
    use = RunUse()
    use.observe(0, Capacity(1), None, complete=True)
    history.append(use.record(RunIdentity("train", 1, "s", None, Capacity(2)), ended_at=10))
    result = rq("suggest", "train")
    assert result.code == 0 and result.out == ""
    assert "no suggestion yet (1 recorded run" in result.err
    assert "Suggested resources: not yet (1 run recorded)" in rq("describe", "train").out


def test_all_covers_arrays_and_skips_what_fits(rq, tasks: Path) -> None:
    (tasks / "sweep.yaml").write_text(ARRAY)
    (tasks / "fits.yaml").write_text(SPEC)
    record_runs(tasks, "sweep[0]", 1, held=1)
    record_runs(tasks, "sweep[1]", 1, held=3)  # the array's elements suggest together
    record_runs(tasks, "fits", 2, held=2, rss=6 * GI + 600 * MI)  # 8Gi with headroom
    result = rq("suggest", "--all")
    assert result.code == 0, result.err
    assert "+++ b/sweep.yaml" in result.out and "fits.yaml" not in result.out
    assert "+  resources: {cpu: 3, memory: 1280Mi}" in result.out
    assert "fits: the declared resources fit" in result.err
    assert (tasks / "sweep.yaml").read_text() == ARRAY


def test_name_or_all(rq, tasks: Path) -> None:
    assert rq("suggest").code == 2
    assert rq("suggest", "nope").code == 1


def test_queues_wide_shows_what_each_queue_declares_holds_and_uses(rq, tasks: Path) -> None:
    queue = {
        "name": "team-a",
        "nominalQuota": {"cpu": 8, "gpu": 0, "memory": "0"},
        "usage": {"cpu": 3, "gpu": 0, "memory": "0"},
        "pending": 0,
        "admitted": 1,
        "observed": {
            "runs": 1,
            "declared": {"cpu": 3, "gpu": 0, "memory": "0"},
            "held": {"cpu": 1, "gpu": 0, "memory": "0"},
            "complete": False,
            "used": {"cpu": 0.25, "memory": "1536Mi", "gpuMemory": "0"},
        },
    }
    bare = {k: v for k, v in queue.items() if k != "observed"}
    document = {"status": {"config": {"valid": True}, "queues": [queue, {**bare, "name": "b"}]}}
    (tasks / "_queues.status.yaml").write_text(yaml.safe_dump(document))
    plain = rq("queues").out.splitlines()
    wide = rq("queues", "-o", "wide").out.splitlines()
    assert plain[0].split()[-1] == "BORROWING-LIMIT"  # the table as it was
    assert wide[0].split()[-4:] == ["RUNS-SEEN", "DECLARED", "HELD", "IN-USE"]
    assert wide[1].startswith(plain[1].rstrip())
    assert wide[1].split("  ")[-1].strip() == "0.25 CPU, 1.5Gi"
    assert "1 CPU (at least)" in wide[1] and wide[2].split()[-4:] == ["-", "-", "-", "-"]
