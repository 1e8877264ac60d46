"""A failed run retried with no backoff is resubmitted in the same pass; its log tail is still
the failed run's, fetched under the failed run's submission id (not the retry's, which Ray
answers with not_found)."""

from __future__ import annotations

import json

import pytest
import yaml

from specs.cluster import FAILED, META_TASK, TailLimits
from specs.task import arraystatus
from tests.support.world import World


def _asked(world: World, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []
    log_tail = world.ray.log_tail

    def recording(submission_id: str, limits: TailLimits) -> str:
        asked.append(submission_id)
        return log_tail(submission_id, limits)

    monkeypatch.setattr(world.ray, "log_tail", recording)
    return asked


def test_a_retry_without_backoff_keeps_the_failed_runs_log(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _asked(world, monkeypatch)
    world.write("t", retry={"limit": 2, "backoffSeconds": 0})
    world.step()
    first = world.status("t")["submissionId"]
    world.ray.set_logs(first, "Traceback\nboom\n")
    world.ray.set_status(first, FAILED, exit_code=3)
    world.step()
    status = world.status("t")
    assert status["submissionId"] != first and status["run"] == 2  # resubmitted this pass
    assert "boom" in status["logTail"]
    assert asked == [first]  # never the new run's id


def test_an_array_elements_retry_keeps_its_log_and_the_sidecar_lists_failures(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _asked(world, monkeypatch)
    doc = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {
            "entrypoint": "python train.py",
            "resources": {"cpu": 1},
            "retry": {"limit": 1, "backoffSeconds": 0},
            "array": {"count": 2},
        },
    }
    (world.tasks / "sweep.yaml").write_text(yaml.safe_dump(doc))
    world.step()
    jobs = {j.metadata[META_TASK]: j.submission_id for j in world.our_jobs()}
    world.ray.set_logs(jobs["sweep[1]"], "first\n")
    world.ray.set_status(jobs["sweep[1]"], FAILED, exit_code=3)
    world.step()
    element = world.reconciler.store.read_statuses(cached=True)["sweep[1]"].status
    assert element.submission_id != jobs["sweep[1]"] and element.log_tail == "first"
    assert asked == [jobs["sweep[1]"]]
    second = element.submission_id
    assert second is not None
    world.ray.set_logs(second, "second\n")
    world.ray.set_status(second, FAILED, exit_code=4)  # the retry fails too: no retry left
    world.step()
    sidecar = json.loads((world.tasks / f"sweep{arraystatus.SUFFIX}").read_bytes())
    assert [(f["index"], f["exitCode"], f["logTail"]) for f in sidecar["failed"]] == [
        (1, 4, "second")
    ]
    assert asked == [jobs["sweep[1]"], second]
