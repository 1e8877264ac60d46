"""A run that holds more than it declares (reconciler/core/task/overuse.py): the margin, the
Overusing condition after it has held over for a while, its clearing, and each queue's
`overuse:` policy (Charge, Warn, Stop after its grace, once per run)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from reconciler.core.task.overuse import CONFIRM_SECONDS, beyond_margin, overuse_words
from specs.cluster import Capacity
from specs.task.models import ConditionType, Phase, Reason
from tests.support.planner_world import GIB, Cluster, running_cluster, task
from tests.unit.core.test_planner import started

MIB = 1024**2


def cpus(n: float) -> Capacity:
    return Capacity(n, 0, 0)


def sid_of(w: Cluster, name: str) -> str:
    sid = w.status(name).submission_id
    assert sid is not None
    return sid


def overusing(w: Cluster, name: str) -> str | None:
    """The Overusing condition's message, or None when the task does not list it."""
    found = [c for c in w.status(name).conditions if c.type == ConditionType.OVERUSING]
    return found[0].message if found else None


@pytest.mark.parametrize(
    ("declared", "held", "over"),
    [
        (cpus(1), cpus(1.4), False),  # 0.4 CPU over: under the 0.5 floor
        (cpus(1), cpus(1.5), True),
        (cpus(10), cpus(10.9), False),  # 0.9 over: within 10 %
        (cpus(10), cpus(11.5), True),
        (Capacity(0, 0, 0), Capacity(0, 1, 0), True),  # one GPU not declared
        (Capacity(1, 0, GIB), Capacity(1, 0, GIB + 200 * MIB), False),  # under 256 MiB
        (Capacity(1, 0, GIB), Capacity(1, 0, GIB + 300 * MIB), True),
        (cpus(4), cpus(1), False),  # holds less
    ],
)
def test_the_margin(declared: Capacity, held: Capacity, over: bool) -> None:
    assert beyond_margin(declared, held) is over


def test_the_words_name_each_resource_held_beyond_its_declaration() -> None:
    assert overuse_words(cpus(1), Capacity(8, 0, 0)) == "holds 8 CPU, declared 1"


QUEUES = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {{cpu: 8}}
      {policy}
"""


def world(policy: str = "", cpu_total: float = 8) -> Cluster:
    return running_cluster(
        {"team-a/train": task(0, 1)}, QUEUES.format(policy=policy), cpus=cpu_total
    )


def test_the_condition_comes_after_the_run_has_held_over_for_a_while_and_clears() -> None:
    w = world()
    sid = sid_of(w, "team-a/train")
    w.held[sid] = cpus(8)
    w.step()
    body = w.status("team-a/train")
    assert body.over_since is not None and overusing(w, "team-a/train") is None
    w.now = body.over_since + timedelta(seconds=CONFIRM_SECONDS - 1)
    w.step()
    assert overusing(w, "team-a/train") is None  # one reading alone never flags a run
    w.now = body.over_since + timedelta(seconds=CONFIRM_SECONDS)
    w.step()
    assert overusing(w, "team-a/train") == "holds 8 CPU, declared 1; counted as held"
    w.held[sid] = cpus(1.2)  # over its declaration, within the margin: the record stands
    w.step()
    assert overusing(w, "team-a/train") == "holds 1.2 CPU, declared 1; counted as held"
    w.held[sid] = cpus(1)  # within its declaration: cleared
    w.step()
    assert overusing(w, "team-a/train") is None
    assert w.status("team-a/train").over_since is None


def test_a_reading_within_the_margin_starts_no_record() -> None:
    w = world()
    w.held[sid_of(w, "team-a/train")] = cpus(1.2)
    w.step(seconds=CONFIRM_SECONDS * 2)
    w.step()
    assert w.status("team-a/train").over_since is None
    assert overusing(w, "team-a/train") is None


def test_a_run_not_in_the_holdings_keeps_its_record_and_an_end_clears_it() -> None:
    w = world()
    sid = sid_of(w, "team-a/train")
    w.held[sid] = cpus(8)
    w.step()
    since = w.status("team-a/train").over_since
    w.held.clear()
    w.step()
    assert w.status("team-a/train").over_since == since
    w.held[sid] = cpus(8)
    w.now = w.now + timedelta(seconds=CONFIRM_SECONDS)
    w.step()
    assert overusing(w, "team-a/train") is not None
    w.ray("team-a/train", "SUCCEEDED")
    w.step()
    assert w.phase("team-a/train") is Phase.SUCCEEDED
    assert w.status("team-a/train").over_since is None
    assert overusing(w, "team-a/train") is None


def flagged(w: Cluster) -> None:
    w.held[sid_of(w, "team-a/train")] = cpus(8)
    w.step()
    w.now += timedelta(seconds=CONFIRM_SECONDS)
    w.step()
    assert overusing(w, "team-a/train") is not None


def test_charge_counts_what_the_run_holds() -> None:
    w = world("overuse: Charge")
    flagged(w)
    w.specs["team-a/next"] = task(0, 1)
    assert started(w.step()) == []  # 8 CPU held of 8


def test_warn_counts_what_the_run_declares() -> None:
    w = world("overuse: Warn")
    flagged(w)
    assert overusing(w, "team-a/train") == "holds 8 CPU, declared 1; counted as declared"
    w.specs["team-a/next"] = task(0, 1)
    assert started(w.step()) == ["team-a/next"]  # 1 CPU declared of 8


def test_stop_stops_the_run_after_its_grace_once_as_a_preemption() -> None:
    w = world("overuse: Stop\n      overuseGraceSeconds: 60")
    flagged(w)
    since = w.status("team-a/train").over_since
    assert since is not None
    old = sid_of(w, "team-a/train")
    w.now = since + timedelta(seconds=CONFIRM_SECONDS + 59)
    p = w.step()
    assert p.stops == [] and w.phase("team-a/train") is Phase.RUNNING
    w.now = since + timedelta(seconds=CONFIRM_SECONDS + 60)
    p = w.step()
    body = w.status("team-a/train")
    assert [s.submission_id for s in p.stops] == [old]
    # Queued again (waiting while its old job stops), counted as a preemption, and saying why.
    assert body.phase is Phase.QUEUED and body.preemptions == 1 and body.retries == 0
    stopped = [c for c in body.conditions if c.type == ConditionType.OVERUSING]
    assert [c.reason for c in stopped] == [Reason.OVERUSE_STOP]
    assert stopped[0].message.startswith("stopped run 1: holds 8 CPU, declared 1 (overuse: Stop")
    assert body.over_since is None
    assert [e.reason for e in p.events if e.reason is Reason.OVERUSING] == [Reason.OVERUSING]
    w.step()
    assert overusing(w, "team-a/train") == stopped[0].message
    # Queued again; it is not stopped twice while the old job stops, and its next run starts.
    w.finish_stops()
    p = w.step()
    assert started(p) == ["team-a/train"] and p.stops == []
    assert w.status("team-a/train").run == 2
    w.step()  # its next run is under way: the condition goes
    assert overusing(w, "team-a/train") is None


def test_without_holdings_nothing_is_judged() -> None:
    w = world("overuse: Stop\n      overuseGraceSeconds: 0")
    for _ in range(3):
        w.step(seconds=CONFIRM_SECONDS)
    assert w.phase("team-a/train") is Phase.RUNNING
    assert w.status("team-a/train").over_since is None


def test_the_default_is_charge_without_a_queue_file() -> None:
    w = Cluster({"train": task(0, 1)}, capacity=Capacity(8, 0, 64 * GIB))
    w.step()
    w.run_all()
    w.held[sid_of(w, "train")] = cpus(8)
    w.step()
    w.now += timedelta(seconds=CONFIRM_SECONDS)
    w.step()
    assert overusing(w, "train") == "holds 8 CPU, declared 1; counted as held"
