"""Nested queues end to end: team-a/_queues.yaml read by the loop, its sub-queues in
`_queues.status.yaml` with their parent, and `rayqueue queues` indenting them."""

from __future__ import annotations

from dataclasses import replace

import yaml

from tests.cli.conftest import spec_text, write

TOP = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 2}
      borrowingLimit: {cpu: 0}
    - name: team-b
      nominalQuota: {cpu: 2}
"""

TEAM_A = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a/x
      nominalQuota: {cpu: 1}
    - name: team-a/y
      nominalQuota: {cpu: 1}
"""


def test_a_teams_file_divides_its_queue_and_the_table_shows_the_tree(rq, world) -> None:
    world.reconciler.options = replace(world.reconciler.options, policy="strict")
    t = world.tasks
    (t / "_queues.yaml").write_text(TOP)
    (t / "team-a").mkdir()
    (t / "team-a" / "_queues.yaml").write_text(TEAM_A)
    for i in range(3):
        write(t, f"team-a/x/a{i}", spec_text(cpu=1))
    world.step()

    # x borrows y's idle CPU (its sibling), never team-b's: team-a may not borrow.
    phases = {
        i: yaml.safe_load((t / f"team-a/x/a{i}.status.yaml").read_text())["status"]
        for i in range(3)
    }
    assert sorted(p["phase"] for p in phases.values()) == ["Queued", "Starting", "Starting"]
    waiting = next(p for p in phases.values() if p["phase"] == "Queued")
    assert waiting["queue"] == "team-a/x"

    status = yaml.safe_load((t / "_queues.status.yaml").read_text())["status"]
    assert status["config"]["valid"] is True
    assert not list(t.glob("team-a/_queues.status*"))  # configuration, never a task
    names = [(q["name"], q.get("parent")) for q in status["queues"]]
    assert names == [
        ("team-a", None),
        ("team-a/x", "team-a"),
        ("team-a/y", "team-a"),
        ("team-b", None),
        ("default", None),
    ]
    by_name = {q["name"]: q for q in status["queues"]}
    assert (by_name["team-a"]["pending"], by_name["team-a"]["admitted"]) == (1, 2)  # rolled up
    assert by_name["team-a/x"]["borrowed"]["cpu"] == 1

    result = rq("queues")
    assert result.code == 0, result.err
    rows = [line for line in result.out.splitlines()[1:] if line.strip()]
    assert [row.split()[0] for row in rows] == [
        "team-a",
        "team-a/x",
        "team-a/y",
        "team-b",
        "default",
    ]
    assert rows[1].startswith("  team-a/x") and rows[0].startswith("team-a")


def test_a_bad_team_file_keeps_the_last_good_tree(rq, world) -> None:
    t = world.tasks
    (t / "_queues.yaml").write_text(TOP)
    (t / "team-a").mkdir()
    (t / "team-a" / "_queues.yaml").write_text(TEAM_A)
    world.step()
    (t / "team-a" / "_queues.yaml").write_text(TEAM_A.replace("team-a/y", "team-b/y"))
    world.step()
    status = yaml.safe_load((t / "_queues.status.yaml").read_text())["status"]
    assert status["config"]["valid"] is False
    assert "team-a/_queues.yaml:7:13: spec.queues[1].name" in status["config"]["error"]
    assert "team-a/y" in [q["name"] for q in status["queues"]]  # the last good tree
    result = rq("queues")
    assert "is invalid (the last good one is in force)" in result.err


def test_validate_reads_the_queues_own_files_too(rq, tasks) -> None:
    (tasks / "_queues.yaml").write_text(TOP)
    write(tasks, "team-a/x/a0", spec_text(cpu=1))
    (tasks / "team-a" / "_queues.yaml").write_text(TEAM_A)
    ok = rq("validate", str(tasks), folder=None)
    assert ok.code == 0, ok.err
    assert "queues team-a/x, team-a/y" in ok.out
    (tasks / "team-a" / "_queues.yaml").write_text(TEAM_A.replace("team-a/y", "team-a"))
    bad = rq("validate", str(tasks), folder=None)
    assert bad.code != 0
    assert f"{tasks}/team-a/_queues.yaml:7:13: spec.queues[1].name:" in bad.err
    assert "(a cycle)" in bad.err


# team-a's own file asks what the top file never gave team-a: preemption, and borrowing
# beyond the 2 CPUs team-a may hold at most (its borrowingLimit is 0).
TEAM_A_WIDER = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a/x
      nominalQuota: {cpu: 1}
      borrowingLimit: {cpu: 8}
      preemption: {reclaimWithinCohort: Any}
"""


def test_the_table_shows_what_each_queue_may_do_with_bounded_fields_marked(rq, world) -> None:
    t = world.tasks
    within = "      borrowingLimit: {cpu: 0}\n      preemption: {withinQueue: LowerPriority}\n"
    (t / "_queues.yaml").write_text(TOP.replace("      borrowingLimit: {cpu: 0}\n", within))
    (t / "team-a").mkdir()
    (t / "team-a" / "_queues.yaml").write_text(TEAM_A_WIDER)
    write(t, "team-a/x/a0", spec_text(cpu=1))
    world.step()
    result = rq("queues")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split()[-2:] == ["PREEMPTION", "BORROWING-LIMIT"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line.strip()}
    assert rows["team-a"][-2:] == ["within=LowerPriority", "cpu=0"]
    assert rows["team-a/x"][-2:] == ["reclaim=Never*", "cpu=1*"]  # 2 at most, less its 1
    assert rows["team-b"][-2:] == ["none", "none"]
    assert "warning: team-a/_queues.yaml:8:41: spec.queues[0].preemption.reclaimWithinCohort" in (
        result.err
    )
    assert "spec.queues[0].borrowingLimit.cpu: 8 CPU goes beyond" in result.err
    as_yaml = yaml.safe_load(rq("queues", "-o", "yaml").out)
    entry = next(q for q in as_yaml["status"]["queues"] if q["name"] == "team-a/x")
    assert entry["effective"]["preemption"]["withinQueue"] == "Never"  # left out: its default
    assert entry["effective"]["borrowingLimit"] == {"cpu": 1}
    validated = rq("validate", str(t), folder=None)
    assert validated.code == 0, validated.err  # bounded, not refused
    assert f"warning: {t}/team-a/_queues.yaml:8:41:" in validated.err
