"""`rayqueue describe`: spec, status, conditions, Ray job with a link, and a log tail."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.cli import common
from specs.cluster import FAILED, RUNNING, Capacity
from tests.cli.conftest import spec_text, write


def submission_id(tasks: Path, name: str) -> str:
    return yaml.safe_load((tasks / f"{name}.status.yaml").read_text())["status"]["submissionId"]


def test_running_task_with_dashboard_link_and_live_log(
    rq, world, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = spec_text(
        priority=4, timeoutSeconds=30, runtimeEnv={"working_dir": "examples/scheduler"}
    ).replace("kind: Task", "kind: Task\nmetadata:\n  labels: {team: v}")
    write(world.tasks, "train", text)
    world.step()
    sid = submission_id(world.tasks, "train")
    world.ray.set_status(sid, RUNNING)
    world.ray.set_logs(sid, "".join(f"line {i}\n" for i in range(30)))
    world.step()
    monkeypatch.setattr(common, "make_adapter", lambda address, *args, **kwargs: world.ray)

    result = rq("describe", "train", "--address", "http://head:8265", "--tail", "3")
    assert result.code == 0, result.err
    out = result.out
    assert "Name:                 train" in out
    assert "Labels:               team=v" in out
    assert "Priority:           4" in out
    assert "Timeout:            30s" in out
    assert "working_dir: examples/scheduler" in out
    assert "Phase:              Running" in out
    assert f"Dashboard:          http://head:8265/#/jobs/{sid}" in out
    assert "Ray status:         RUNNING" in out
    assert out.rstrip().endswith("line 27\n  line 28\n  line 29".replace("\n", "\n"))
    assert "line 26" not in out


def test_failed_task_shows_the_saved_log_tail(rq, world) -> None:
    write(world.tasks, "crash", spec_text())
    world.step()
    sid = submission_id(world.tasks, "crash")
    world.ray.set_logs(sid, "Traceback\nZeroDivisionError\n")
    world.ray.set_status(sid, FAILED)
    world.step()
    out = rq("describe", "crash").out
    assert "Phase:              Failed" in out
    assert "Log tail (saved when the run failed):\n  Traceback\n  ZeroDivisionError" in out
    assert "pass --address" in out  # no address: no link, but a hint


def test_conditions_table(rq, world) -> None:
    write(world.tasks, "a", spec_text())
    world.ray.available = False
    world.step()
    out = rq("describe", "a").out
    assert "Conditions:\n  TYPE" in out
    assert "ClusterUnavailable" in out and "RayUnreachable" in out


def test_not_seen_and_stale(rq, world) -> None:
    path = write(world.tasks, "a", spec_text())
    out = rq("describe", "a").out
    assert "Status:" in out and "not yet seen by the reconciler" in out
    assert "Ray job:              <none>" in out
    world.step()
    path.write_text(spec_text(entrypoint="echo changed"))
    assert "has not caught up" in rq("describe", "a").out


def test_invalid_spec_lists_every_error(rq, tasks: Path) -> None:
    write(tasks, "bad", "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  priorty: 1\n  cpu: 2\n")
    out = rq("describe", "bad").out
    assert "Spec:                 invalid" in out
    assert "spec.priorty: unknown field" in out
    assert "spec.cpu: unknown field" in out
    assert "spec.entrypoint: required field is missing" in out


def test_not_found(rq, tasks: Path) -> None:
    result = rq("describe", "nope")
    assert result.code == 1
    assert 'task "nope" not found' in result.err


def test_dependencies_with_their_state_retry_policy_and_exit_code(rq, world) -> None:
    write(world.tasks, "prep", spec_text())
    train = spec_text().replace(
        "spec:\n",
        "spec:\n  retry: {limit: 3, nonRetryableExitCodes: [2]}\n"
        "  dependsOn:\n    - name: prep\n    - name: ghost\n      condition: Finished\n",
    )
    write(world.tasks, "train", train)
    world.step()
    world.ray.set_status(submission_id(world.tasks, "prep"), FAILED, exit_code=2)
    world.step()
    out = rq("describe", "train").out
    assert (
        "Retry:              limit 3, on Failed, Lost, after 10s, 20s, 40s; final exit codes 2"
        in out
    )
    assert "    prep (Succeeded): Failed, cannot be met" in out
    assert "    ghost (Finished): missing, waiting" in out
    assert "DependencyFailed" in out
    prep = rq("describe", "prep").out
    assert "Exit code:          2" in prep
    wide = rq("get", "-o", "wide").out
    header = wide.splitlines()[0]
    assert "DEPENDS" in header
    assert "prep,ghost(Finished)" in wide


def test_a_running_task_shows_what_its_ray_job_holds_beside_what_it_declares(
    rq, world, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(world.tasks, "fanout", spec_text(cpu=1))
    world.step()
    sid = submission_id(world.tasks, "fanout")
    world.ray.set_status(sid, RUNNING)
    world.step()
    world.ray.hold(sid, actors=Capacity(8), groups=Capacity(0, 1, 2**30))
    monkeypatch.setattr(common, "make_adapter", lambda address, *args, **kwargs: world.ray)
    out = rq("describe", "fanout", "--address", "http://head:8265").out
    assert "Holds in Ray:       8 CPU, 1 GPU, 1Gi memory (declared 1 CPU, 0 GPU, 0 memory)" in out
    world.ray.hold(sid, tasks=Capacity(3), complete=False)
    out = rq("describe", "fanout", "--address", "http://head:8265").out
    assert "3 CPU, 0 GPU, 0 memory (declared 1 CPU, 0 GPU, 0 memory); at least" in out
    world.ray.census_supported = False
    assert (
        "(could not ask Ray: fake Ray has no state API)"
        in rq("describe", "fanout", "--address", "http://head:8265").out
    )
    # Without an address nothing is asked of Ray.
    assert "Holds in Ray" not in rq("describe", "fanout").out


def test_describe_names_the_tasks_queue(rq, world) -> None:
    (world.tasks / "_queues.yaml").write_text(
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n"
        "    - name: team-a\n      nominalQuota: {cpu: 2}\n"
    )
    write(world.tasks, "team-a/train", spec_text())
    world.step()
    out = rq("describe", "team-a/train").out
    assert "  Queue:              team-a\n" in out
