"""`rayqueue plan`: the next pass, planned as serve would, without writing or submitting."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.cli import common
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import RUNNING
from tests.cli.conftest import QUEUE_ID, snapshot, spec_text, write

ADDRESS = ("--address", "http://head:8265", "--queue-id", QUEUE_ID)


@pytest.fixture
def fake(world, monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    monkeypatch.setattr(common, "make_adapter", lambda address, *args, **kwargs: world.ray)
    return world.ray


def sections(out: str) -> dict[str, list[str]]:
    """Section title -> the names in its rows."""
    result: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        if line.endswith("):") and "(" in line:
            current = line.split(" (")[0]
            result[current] = []
        elif current and line.startswith("  ") and not line.startswith("  NAME"):
            if not line.startswith("  POSITION"):
                result[current].append(line.split()[1 if current == "Waiting" else 0])
        elif not line.strip():
            current = None
    return result


def test_first_pass_plan_is_read_only(rq, world, fake: FakeRay) -> None:
    t = world.tasks
    write(t, "big", spec_text(cpu=3, priority=9))
    write(t, "small", spec_text(cpu=2, priority=1))
    write(t, "tiny", spec_text(cpu=1, priority=0))
    write(t, "huge", spec_text(cpu=64))
    write(t, "broken", spec_text().replace("priority: 0", "priorty: 1"))
    before = snapshot(t)

    result = rq("plan", *ADDRESS, "--policy", "strict")
    assert result.code == 0, result.err
    out = result.out
    found = sections(out)
    assert found["Would submit"] == ["big"]
    assert found["Waiting"] == ["small", "tiny"]
    assert found["Unschedulable"] == ["huge"]
    assert "WaitingForResources: needs 2 CPU; 1 free" in out
    assert "waits behind small" in out
    assert "asks for 64 CPU" in out
    assert "broken" in found["Would record"]
    assert f"queue {QUEUE_ID}, policy strict" in out
    assert "Cluster: 4 CPU, 0 GPU, 16Gi memory" in out
    assert "Nothing was changed" in out

    assert dict(fake.calls) == {"list_jobs": 1, "capacity": 1}  # exactly one of each
    assert fake.submitted == []
    assert snapshot(t) == before  # not one byte written


def test_timeout_and_deletion_stops(rq, world, fake: FakeRay) -> None:
    t = world.tasks
    write(t, "slow", spec_text(timeoutSeconds=5))
    write(t, "doomed", spec_text())
    world.clock.now -= 100  # these runs started 100 s ago
    world.step()
    for name in ("slow", "doomed"):
        sid = yaml.safe_load((t / f"{name}.status.yaml").read_text())["status"]["submissionId"]
        fake.set_status(sid, RUNNING)
    world.step()
    (t / "doomed.yaml").unlink()
    before = snapshot(t)
    fake.calls.clear()

    out = rq("plan", *ADDRESS).out
    found = sections(out)
    assert found["Would time out"] == ["slow"]
    assert "ran longer than timeoutSeconds=5" in out
    assert sorted(found["Would stop"]) == ["doomed", "slow"]
    assert "spec deleted" in out
    assert dict(fake.calls) == {"list_jobs": 1, "capacity": 1}
    assert fake.stop_requested == set() and all(j.status == RUNNING for j in fake.jobs.values())
    assert snapshot(t) == before


def test_policy_option_changes_the_plan(rq, world, fake: FakeRay) -> None:
    write(world.tasks, "holder", spec_text(cpu=2, priority=9))
    world.step()  # holder takes 2 of the 4 CPUs
    write(world.tasks, "big", spec_text(cpu=3, priority=5))
    write(world.tasks, "small", spec_text(cpu=1, priority=1))
    strict = sections(rq("plan", *ADDRESS).out)
    assert "Would submit" not in strict  # big does not fit, and nothing overtakes it
    assert strict["Waiting"] == ["big", "small"]
    best = sections(rq("plan", *ADDRESS, "--policy", "besteffort").out)
    assert best["Would submit"] == ["small"]
    assert best["Waiting"] == ["big"]


def test_nothing_to_do(rq, world, fake: FakeRay) -> None:
    out = rq("plan", *ADDRESS).out
    assert "Nothing to submit, stop or time out." in out


def test_errors(rq, world, fake: FakeRay, tmp_path: Path) -> None:
    result = rq("plan")
    assert result.code == 1 and "--address" in result.err
    fake.available = False
    result = rq("plan", *ADDRESS)
    assert result.code == 1 and "cannot read Ray" in result.err
    fake.available = True
    result = rq("plan", *ADDRESS, folder=tmp_path / "nowhere")
    assert result.code == 1 and "does not exist" in result.err
    assert rq("plan", *ADDRESS, "--policy", "random").code == 2


def test_count_foreign_jobs_reads_entrypoint_resources_as_serve_does(
    rq, world, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = []

    def adapter(address: str, *args: object, **kwargs: object):
        made.append(kwargs)
        return world.ray

    monkeypatch.setattr(common, "make_adapter", adapter)
    assert rq("plan", *ADDRESS).code == 0
    assert rq("plan", *ADDRESS, "--count-foreign-jobs").code == 0
    assert [m["entrypoint_resources"] for m in made] == [False, True]


def test_waiting_beyond_the_exact_places_keeps_its_order(
    rq, world, fake: FakeRay, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sidecars show exact places only for the first N; the plan still lists every waiting task
    # at its exact place (a task beyond N once sorted as place 0, ahead of the head).
    monkeypatch.setenv("RAYQUEUE_EXACT_QUEUE_POSITIONS", "1")
    t = world.tasks
    write(t, "big", spec_text(cpu=3, priority=9))
    for name, priority in (("p5", 5), ("p4", 4), ("p3", 3)):
        write(t, name, spec_text(cpu=2, priority=priority))

    result = rq("plan", *ADDRESS, "--policy", "strict")
    assert result.code == 0, result.err
    assert sections(result.out)["Waiting"] == ["p5", "p4", "p3"]
    places = [line.split()[0] for line in result.out.split("Waiting", 1)[1].splitlines()[2:5]]
    assert places == ["1", "2", "3"]
