"""Team queues against the real Ray head: two team folders with quotas on the 4-CPU fixture.
Shares are measured from Ray's own start and end times, not from our statuses."""

from __future__ import annotations

import pytest
import yaml

from specs.cluster import RayJob
from specs.folder.atomic import write_atomic

pytestmark = pytest.mark.ray

SLEEP = "python -c 'import time; time.sleep({})'"
QUEUES = {
    "apiVersion": "rayqueue/v1",
    "kind": "QueueConfig",
    "spec": {
        "queues": [
            {"name": "team-a", "nominalQuota": {"cpu": 2}},
            {"name": "team-b", "nominalQuota": {"cpu": 2}, "borrowingLimit": {"cpu": 0}},
        ]
    },
}


def _most_at_once(jobs: list[RayJob], until: float | None = None) -> int:
    """The most of `jobs` running at one moment (by Ray's times), looking only before `until`."""
    edges = []
    for job in jobs:
        assert job.start_time is not None and job.end_time is not None
        if until is not None and job.start_time >= until:
            continue
        edges += [(job.start_time, 1), (job.end_time, -1)]
    most = running = 0
    for _, change in sorted(edges):  # an end sorts before a start at the same instant
        running += change
        most = max(most, running)
    return most


def _cpu_seconds(jobs: list[RayJob], start: float, end: float) -> float:
    return sum(max(0.0, min(j.end_time or 0, end) - max(j.start_time or 0, start)) for j in jobs)


def test_two_teams_share_the_cluster_by_quota(make_queue) -> None:
    q = make_queue()
    write_atomic(q.dir / "_queues.yaml", yaml.safe_dump(QUEUES).encode())
    for i in range(8):
        q.write(f"team-a/a{i}", {"entrypoint": SLEEP.format(3), "resources": {"cpu": 1}})
    for i in range(4):
        q.write(f"team-b/b{i}", {"entrypoint": SLEEP.format(3), "resources": {"cpu": 1}})
    q.start()
    names = [f"team-a/a{i}" for i in range(8)] + [f"team-b/b{i}" for i in range(4)]
    for name in names:
        q.wait_phase(name, {"Succeeded"}, timeout=180)
    assert q.status("team-a/a0")["queue"] == "team-a"
    assert q.status("team-b/b0")["queue"] == "team-b"

    jobs = [j for j in q.jobs() if j.terminal]
    team = {j.submission_id: j.metadata["rayqueue.task"].split("/")[0] for j in jobs}
    a = [j for j in jobs if team[j.submission_id] == "team-a"]
    b = [j for j in jobs if team[j.submission_id] == "team-b"]
    assert len(a) == 8 and len(b) == 4
    # team-b may not borrow: never more than its 2 CPUs at once
    assert _most_at_once(b) <= 2
    # while team-b still had work waiting, team-a kept to its nominal 2 CPUs...
    last_b_start = max(j.start_time or 0 for j in b)
    assert _most_at_once(a, until=last_b_start) <= 2
    # ...and the two shared that time about equally, by Ray's clocks
    first = min(j.start_time or 0 for j in jobs)
    share_a, share_b = _cpu_seconds(a, first, last_b_start), _cpu_seconds(b, first, last_b_start)
    assert share_b > 0 and 0.5 <= share_a / share_b <= 2.0, (share_a, share_b)
    # once team-b was done, team-a borrowed its idle quota
    assert _most_at_once(a) >= 3
    print(
        f"contended {last_b_start - first:.1f} s: team-a {share_a:.1f} CPU-s, team-b "
        f"{share_b:.1f} CPU-s; most at once: team-a {_most_at_once(a, until=last_b_start)} "
        f"then {_most_at_once(a)}, team-b {_most_at_once(b)}"
    )

    status = yaml.safe_load((q.dir / "_queues.status.yaml").read_text())["status"]
    assert status["config"]["valid"] is True
    assert [entry["name"] for entry in status["queues"]] == ["team-a", "team-b", "default"]
