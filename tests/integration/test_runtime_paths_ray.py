"""RuntimeEnv paths against a real Ray head: a spec whose working_dir lies outside the roots
is Invalid and Ray never sees a job (nothing is zipped or uploaded); one inside the roots runs,
and the job reads a file Ray shipped from that folder. Harmless temporary folders only."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from reconciler.app.assembly import build_reconciler
from specs.tenancy.access import Tokens

pytestmark = pytest.mark.ray

READ = "python -c \"print(open('data.txt').read().strip())\""


def test_working_dir_outside_the_roots_never_reaches_ray(make_queue, tmp_path: Path) -> None:
    root = tmp_path / "code"
    (root / "proj").mkdir(parents=True)
    (root / "proj" / "data.txt").write_text("shipped-from-the-root\n")
    private = tmp_path / "private"
    private.mkdir()
    (private / "data.txt").write_text("must-never-leave-this-machine\n")
    q = make_queue(working_dir_roots=(str(root),))
    q.write(
        "inside",
        {
            "entrypoint": READ,
            "resources": {"cpu": 1},
            "runtimeEnv": {"working_dir": str(root / "proj")},
        },
    )
    q.write(
        "outside",
        {"entrypoint": READ, "resources": {"cpu": 1}, "runtimeEnv": {"working_dir": str(private)}},
    )
    # What serve builds: the store checks every spec it reads, the loop every submission.
    q.reconciler = build_reconciler(q.settings, q.ray, tokens=Tokens())
    q.stop_event = threading.Event()
    q.thread = threading.Thread(target=q.reconciler.run, args=(q.stop_event,), daemon=True)
    q.thread.start()
    inside = q.wait_phase("inside", {"Succeeded", "Failed"}, timeout=120)
    assert inside["phase"] == "Succeeded", inside
    assert "shipped-from-the-root" in q.ray.logs(str(inside["submissionId"]))
    outside = q.wait_phase("outside", {"Invalid"})
    assert "spec.runtimeEnv.working_dir" in str(outside["message"])
    assert "outside the allowed roots" in str(outside["message"])
    assert [j.metadata["rayqueue.task"] for j in q.jobs()] == ["inside"]
