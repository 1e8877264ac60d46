"""Task arrays in the CLI: `get` shows an array as one row with its progress, `--elements` one
row per element, and `rerun NAME --failed` runs again only the failed elements."""

from __future__ import annotations

from specs.cluster import FAILED, META_TASK, RUNNING, SUCCEEDED
from tests.cli.conftest import spec_text, write


def _jobs(world) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {j.metadata[META_TASK]: j.submission_id for j in world.our_jobs()}


def _sweep(rq, world) -> None:  # type: ignore[no-untyped-def]
    write(world.tasks, "sweep", spec_text(array={"count": 6, "maxParallel": 4}))
    write(world.tasks, "solo", spec_text())
    world.step()
    jobs = _jobs(world)
    world.ray.set_status(jobs["sweep[0]"], SUCCEEDED)
    world.ray.set_status(jobs["sweep[1]"], FAILED, exit_code=2)
    world.ray.set_status(jobs["sweep[2]"], RUNNING)
    world.step(2)


def test_get_shows_an_array_as_one_row_with_progress(rq, world) -> None:
    _sweep(rq, world)
    result = rq("get")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line for line in result.out.splitlines()[1:]}
    assert set(rows) == {"sweep", "solo"}
    assert rows["sweep"].split()[2] == "Running"
    assert rows["sweep"].endswith("1/6 done, 3 running, 1 queued, 1 failed")
    elements = rq("get", "sweep", "--elements")
    assert [line.split()[0] for line in elements.out.splitlines()[1:]][:3] == [
        "sweep[2]",
        "sweep[3]",
        "sweep[4]",
    ]
    assert len(elements.out.splitlines()) == 7  # a header and six elements
    assert "solo" not in elements.out


def test_rerun_failed_runs_only_the_failed_elements_again(rq, world) -> None:
    _sweep(rq, world)

    def runs() -> dict[str, tuple[str, int]]:
        statuses = world.reconciler.store.read_statuses()
        return {
            n: (s.status.phase.value, s.status.run)
            for n, s in statuses.items()
            if n.startswith("sweep[")
        }

    before = runs()
    assert before["sweep[1]"] == ("Failed", 1)
    result = rq("rerun", "sweep", "--failed")
    assert result.code == 0, result.err
    assert "restarted 1 failed element: sweep[1]" in result.out
    world.step(2)
    after = runs()
    # sweep[1] is queued for a new run (the cluster is full); the others are as they were
    assert after.pop("sweep[1]") == ("Queued", 1)
    del before["sweep[1]"]
    assert after == before
    assert rq("rerun", "solo", "--failed").code != 0  # not an array


def test_logs_of_one_element(rq, world, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from reconciler.cli import common

    write(world.tasks, "sweep", spec_text(array={"count": 2}))
    world.step()
    world.ray.set_logs(_jobs(world)["sweep[1]"], "element one\n")
    monkeypatch.setattr(common, "make_adapter", lambda *a, **k: world.ray)
    result = rq("logs", "sweep[1]", "--address", "http://head:8265")
    assert (result.code, result.out) == (0, "element one\n")
    missing = rq("logs", "sweep[7]", "--address", "http://head:8265")
    assert missing.code != 0 and 'task "sweep[7]" not found' in missing.err


def test_describe_sums_an_array_up(rq, world) -> None:  # type: ignore[no-untyped-def]
    _sweep(rq, world)
    result = rq("describe", "sweep")
    assert result.code == 0, result.err
    out = result.out
    assert "Elements:             6" in out and "Max parallel:         4" in out
    assert "Progress:             1/6 done, 3 running, 1 queued, 1 failed" in out
    assert "sweep[1]   Failed   2" in out
    one = rq("describe", "sweep[1]")  # one element in full
    assert one.code == 0 and "RAYQUEUE_ARRAY_INDEX: '1'" in one.out


def test_get_elements_shows_each_elements_values(rq, world) -> None:  # type: ignore[no-untyped-def]
    write(world.tasks, "grid", spec_text(array={"matrix": {"lr": [0.1, 0.2], "seed": [1, 2]}}))
    write(world.tasks, "plain", spec_text())
    world.step()
    result = rq("get", "--elements")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split()[-2:] == ["VALUES", "MESSAGE"]
    values = {line.split()[0]: line.split()[8] for line in lines[1:]}
    assert values == {
        "grid[0]": "lr=0.1,seed=1",
        "grid[1]": "lr=0.1,seed=2",
        "grid[2]": "lr=0.2,seed=1",
        "grid[3]": "lr=0.2,seed=2",
        "plain": "-",
    }


def test_describe_keeps_a_failed_elements_log_lines_apart(rq, world) -> None:  # type: ignore[no-untyped-def]
    write(world.tasks, "sweep", spec_text(array={"count": 2}))
    world.step()
    message = (
        "Job entrypoint command failed with exit code 1, last logs:\nTraceback\nKeyError: 'lr'"
    )
    world.ray.set_status(_jobs(world)["sweep[1]"], FAILED, exit_code=1, message=message)
    world.step(2)
    out = rq("describe", "sweep").out
    table, _, logged = out.partition("Log lines in sweep[1]'s message")
    row = next(line for line in table.splitlines() if line.strip().startswith("sweep[1]"))
    assert row.rstrip().endswith("failed with exit code 1, last logs:")
    assert "Traceback" not in table and "  Traceback\n  KeyError: 'lr'" in logged
