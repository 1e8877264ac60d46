"""Pass cost of the git revision in status: 1,000 specs in a git clone, with and without it.

python -m benchmarks.gitrev                # 1,000 specs
python -m benchmarks.gitrev --size 100     # a quick run

Three kinds of pass, each with `git_revision` off and on, in the same process run:
steady (nothing changed: the revision is reused, no git call), one spec edited (one
`git status`), and a new commit (HEAD moved: one `git status`).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.common import save, spec_text, table, write_before_start
from reconciler.app.runtime import tune_gc
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings

PASSES = 10


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@example.com", "-C", str(repo), *args],
        check=True,
        capture_output=True,
    )


def measure(size: int, root: Path, enabled: bool) -> dict[str, float | str | int]:
    repo = root / f"repo-{enabled}"
    folder = repo / "tasks"
    folder.mkdir(parents=True)
    for i in range(size):
        write_before_start(folder / f"t{i:05d}.yaml", spec_text(priority=i % 10))
    # Sidecars beside the specs would make git see a thousand untracked files; as in a real
    # GitOps setup they go to a status folder outside the checkout.
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "specs")
    settings = Settings(
        tasks_dir=folder,
        status_dir=root / f"status-{enabled}",
        queue_id="bench",
        api=False,
        settle_seconds=0,
        git_revision=enabled,
    )
    ray = FakeRay(Capacity(8, 0, 2**40))
    rec = Reconciler(settings, TaskStore(folder, settings.status_dir, settle_seconds=0), ray)
    tune_gc()
    rec.run_pass()
    rec.run_pass()

    def timed() -> float:
        wall = time.perf_counter()
        rec.run_pass()
        return 1000 * (time.perf_counter() - wall)

    steady = [timed() for _ in range(PASSES)]
    # A comment changes the file's bytes (so git is asked) but not the task, so no status
    # changes: what is left is the cost of noticing and of the git call itself.
    edited = []
    for round_ in range(PASSES):
        (folder / "t00001.yaml").write_bytes(spec_text(priority=1) + f"# {round_}\n".encode())
        edited.append(timed())
    committed = []
    for round_ in range(PASSES):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"empty {round_}")
        committed.append(timed())  # only HEAD moved
    revisions = rec.revisions
    # The parts on their own, free of the pass's noise: one forced git call, one cached check.
    git_call = cached = 0.0
    if revisions is not None:
        calls, checks = [], []
        for round_ in range(PASSES):
            start = time.perf_counter()
            revisions.current(("forced", round_))
            calls.append(1000 * (time.perf_counter() - start))
            start = time.perf_counter()
            revisions.current(("forced", round_))
            checks.append(1000 * (time.perf_counter() - start))
        git_call, cached = min(calls), min(checks)
    return {
        "specs": size,
        "git_revision": "on" if enabled else "off",
        "steady_pass_ms": min(steady),
        "one_spec_edited_ms": min(edited),
        "new_commit_ms": min(committed),
        "git_calls": revisions.calls if revisions is not None else 0,
        "git_status_call_ms": git_call,
        "cached_check_ms": cached,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None, help="JSON result file")
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        raise SystemExit("needs the git binary")
    rows: list[dict[str, float | str | int]] = []
    with tempfile.TemporaryDirectory(prefix="rq-bench-git-") as tmp:
        for enabled in (False, True, True, False):  # ABBA: drift is not charged to one side
            rows.append(measure(args.size, Path(tmp) / f"{len(rows)}", enabled))
    header = list(rows[0])
    print(
        table(
            "git revision pass cost (fake Ray adapter, wall ms)",
            header,
            [list(r.values()) for r in rows],
        )
    )
    print(f"results: {save('gitrev', {'rows': rows}, args.out)}")


if __name__ == "__main__":
    main()
