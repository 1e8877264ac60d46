"""A preemption across folders on a real Ray head: team-b's urgent task stops team-a's real
job and runs; team-a's job runs again after it. What team-a reads of its task (its sidecar and
the API's task view) never names team-b's task. The same as test_preempted_by.py, with Ray's
own record of the jobs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specs.cluster import META_TASK, STOPPED
from specs.task.visibility import ANOTHER_FOLDER
from tests.api.conftest import task_json
from tests.tenancy.conftest import auth
from tests.tenancy.realloop import RealLoop, real_loop

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]


@pytest.fixture
def loop(ray_head: str, tasks_dir: Path, tokens_file: Path) -> Iterator[RealLoop]:
    with real_loop(
        ray_head,
        tasks_dir,
        tokens_file,
        preemption="LowerPriority",
        preemption_grace_seconds=1,
    ) as running:
        yield running


def test_a_real_preemption_across_folders_names_no_preemptor_to_the_victim(loop: RealLoop) -> None:
    api = loop.api
    seen_by_team_a: list[str] = []

    def keep_what_team_a_reads() -> None:
        path = loop.reconciler.store.status_path("team-a/low")
        if path.exists():
            view = api.get("/tasks/team-a/low", headers=auth("team-a"))
            seen_by_team_a.append(path.read_text() + view.text)

    loop.after_pass = keep_what_team_a_reads
    low = task_json("sleep 120", cpu=4)
    assert api.put("/tasks/team-a/low", json=low, headers=auth("team-a")).status_code == 201
    loop.until(lambda: loop.status("team-a/low").get("phase") == "Running", "team-a's job")
    urgent = task_json("sleep 1", cpu=4, priority=9)
    assert api.put("/tasks/team-b/urgent", json=urgent, headers=auth("team-b")).status_code == 201
    loop.until(lambda: bool(loop.status("team-a/low").get("preemptions")), "the preemption")
    assert str(loop.status("team-a/low").get("preemptedBy")).startswith(ANOTHER_FOLDER)
    loop.until(
        lambda: loop.status("team-b/urgent").get("phase") == "Succeeded", "the preemptor's run", 90
    )
    loop.until(
        lambda: loop.status("team-a/low").get("phase") == "Running", "the victim's next run", 90
    )
    again = loop.status("team-a/low")
    assert again["run"] == 2 and again["preemptions"] == 1 and "preemptedBy" not in again
    # Ray's own record: team-a's first run was stopped.
    first = [
        j
        for j in loop.ours()
        if j.metadata.get(META_TASK) == "team-a/low" and j.metadata.get("rayqueue.run") == "1"
    ]
    assert [j.status for j in first] == [STOPPED]
    leaks = [text for text in seen_by_team_a if "team-b" in text or "urgent" in text]
    assert not leaks, leaks[0]
