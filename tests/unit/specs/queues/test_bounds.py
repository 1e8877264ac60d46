"""A team's own `_queues.yaml` divides what its parent grants and never widens it: each field
that gives a queue power over others, asked beyond the parent's, is bounded where the tree is
read (`divide_tree`), with a note naming the file, line and field; what stays within is kept."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from specs.queues.bounds import DEFAULT_PREEMPTION, Bounded, effective_policy
from specs.queues.config import QueueConfig, QueueEntry
from specs.queues.parse import parse_queue_config
from specs.queues.tree import divide_tree
from specs.settings.planner import PlannerSettings

ROOT = Path("/tasks")


def _file(queues: list[dict[str, Any]]) -> str:
    document = {"apiVersion": "rayqueue/v1", "kind": "QueueConfig", "spec": {"queues": queues}}
    return yaml.safe_dump(document, sort_keys=False)


def _tree(
    top: list[dict[str, Any]], own: dict[str, list[dict[str, Any]]]
) -> tuple[QueueConfig, list[Bounded]]:
    """The tree serve reads: `top` the admin's file, `own` each folder's own file."""
    files = {ROOT / folder / "_queues.yaml": _file(queues) for folder, queues in own.items()}

    def read(path: Path) -> bytes | None:
        text = files.get(path)
        return text.encode() if text is not None else None

    bounded: list[Bounded] = []
    tree = divide_tree(parse_queue_config(_file(top)), ROOT, read=read, bounded=bounded)
    return tree, bounded


def _entry(tree: QueueConfig, name: str) -> QueueEntry:
    return next(q for q in tree.spec.queues if q.name == name)


TEAM_A = {"name": "team-a", "nominalQuota": {"cpu": 8}}
TEAM_B = {"name": "team-b", "nominalQuota": {"cpu": 8}}


# (field, the parent's block, the sub-queue's value, what is in force)
WIDENING = [
    ("withinQueue", {}, "LowerPriority", "Never"),
    ("reclaimWithinCohort", {}, "Any", "Never"),
    ("reclaimWithinCohort", {"reclaimWithinCohort": "LowerPriority"}, "Any", "LowerPriority"),
    ("gracePeriodSeconds", {"gracePeriodSeconds": 10}, 600, 10),
    ("gracePeriodSeconds", {}, 3600, 30),  # the parent's default bounds it too
    ("minRuntimeSeconds", {}, 3600, 0),
    ("minRuntimeSeconds", {"minRuntimeSeconds": 60}, 61, 60),
    ("minPreemptorPriority", {"minPreemptorPriority": 5}, 0, 5),
    ("maxPerTask", {}, 1, 3),  # spared after one preemption: safe from reclaim sooner
    ("maxPerTask", {"maxPerTask": 0}, 5, 0),  # the parent's runs are never spared
]


@pytest.mark.parametrize(("field", "parent", "asked", "kept"), WIDENING)
def test_a_preemption_field_asked_beyond_the_parent_is_bounded_to_the_parents(
    field: str, parent: dict[str, Any], asked: Any, kept: Any
) -> None:
    tree, bounded = _tree(
        [{**TEAM_A, "preemption": parent}, TEAM_B],
        {"team-a": [{"name": "team-a/x", "preemption": {field: asked}}]},
    )
    in_force = effective_policy(tree)["team-a/x"]["preemption"]
    assert in_force[field] == kept
    [note] = bounded
    assert (note.queue, note.field) == ("team-a/x", f"preemption.{field}")
    assert note.in_force == str(kept)
    assert note.note.file == "team-a/_queues.yaml"
    assert note.note.field == f"spec.queues[0].preemption.{field}"
    assert note.note.line == 7  # the line of the field in the file
    assert "goes beyond what its parent grants" in note.note.message
    assert f"team-a has {field}" in note.note.message


# (field, the parent's block, a value within it)
WITHIN = [
    ("withinQueue", {"withinQueue": "LowerPriority"}, "LowerPriority"),
    ("reclaimWithinCohort", {"reclaimWithinCohort": "Any"}, "LowerPriority"),
    ("gracePeriodSeconds", {}, 5),
    ("minRuntimeSeconds", {"minRuntimeSeconds": 60}, 30),
    ("minPreemptorPriority", {"minPreemptorPriority": 5}, 7),
    ("maxPerTask", {}, 5),
    ("maxPerTask", {"maxPerTask": 3}, 0),
]


@pytest.mark.parametrize(("field", "parent", "asked"), WITHIN)
def test_a_preemption_field_within_the_parents_is_kept(
    field: str, parent: dict[str, Any], asked: Any
) -> None:
    tree, bounded = _tree(
        [{**TEAM_A, "preemption": parent}, TEAM_B],
        {"team-a": [{"name": "team-a/x", "preemption": {field: asked}}]},
    )
    assert effective_policy(tree)["team-a/x"]["preemption"][field] == asked
    assert bounded == []


def test_a_field_left_out_takes_its_default_bounded_by_the_parent_without_a_note() -> None:
    tree, bounded = _tree(
        [{**TEAM_A, "preemption": {"gracePeriodSeconds": 5, "maxPerTask": 10}}, TEAM_B],
        {"team-a": [{"name": "team-a/x"}]},
    )
    block = _entry(tree, "team-a/x").preemption
    assert (block.grace_period_seconds, block.max_per_task) == (5, 10)
    assert bounded == []


def test_the_sub_queues_of_a_file_share_what_their_parent_has_left_of_its_nominal_quota() -> None:
    tree, bounded = _tree(
        [TEAM_A, {"name": "team-a/x", "nominalQuota": {"cpu": 2}}, TEAM_B],
        {
            "team-a": [
                {"name": "team-a/y", "nominalQuota": {"cpu": 6, "memory": "4Gi"}},
                {"name": "team-a/z", "nominalQuota": {"cpu": 12}},
            ]
        },
    )
    # team-a has 8, the top file gave team-a/x 2: y and z share 6 in proportion (6:12)
    assert _entry(tree, "team-a/x").nominal_quota.cpu == 2
    assert _entry(tree, "team-a/y").nominal_quota.cpu == pytest.approx(2)
    assert _entry(tree, "team-a/z").nominal_quota.cpu == pytest.approx(4)
    assert _entry(tree, "team-a/y").nominal_quota.memory == 0  # team-a has no memory to divide
    fields = sorted((b.queue, b.field) for b in bounded)
    assert fields == [
        ("team-a/y", "nominalQuota.cpu"),
        ("team-a/y", "nominalQuota.memory"),
        ("team-a/z", "nominalQuota.cpu"),
    ]
    z = next(b for b in bounded if b.queue == "team-a/z")
    assert (z.written, z.in_force) == ("12 CPU", "4 CPU")
    assert "team-a has 6 CPU left for the sub-queues this file lists, which ask 18 CPU" in str(
        z.note
    )


def test_sub_queues_within_their_parents_nominal_quota_are_kept() -> None:
    tree, bounded = _tree(
        [TEAM_A, TEAM_B],
        {"team-a": [{"name": f"team-a/{n}", "nominalQuota": {"cpu": 4}} for n in "xy"]},
    )
    assert [_entry(tree, f"team-a/{n}").nominal_quota.cpu for n in "xy"] == [4, 4]
    assert bounded == []


def test_a_borrowing_limit_is_at_most_what_the_parent_may_hold_less_the_own_nominal() -> None:
    parent = {**TEAM_A, "borrowingLimit": {"cpu": 2}}
    tree, bounded = _tree(
        [parent, TEAM_B],
        {
            "team-a": [
                {"name": "team-a/x", "nominalQuota": {"cpu": 2}, "borrowingLimit": {"cpu": 64}}
            ]
        },
    )
    assert _entry(tree, "team-a/x").borrowing_limit.cpu == 8  # team-a holds at most 8 + 2
    [note] = bounded
    assert note.field == "borrowingLimit.cpu" and note.in_force == "8 CPU"
    # Without a borrowingLimit of its parent's, the sub-queue's own stands.
    tree, bounded = _tree(
        [TEAM_A, TEAM_B],
        {"team-a": [{"name": "team-a/x", "borrowingLimit": {"cpu": 64}}]},
    )
    assert _entry(tree, "team-a/x").borrowing_limit.cpu == 64 and bounded == []


@pytest.mark.parametrize(
    ("field", "attribute"), [("maxRunning", "max_running"), ("maxQueued", "max_queued")]
)
def test_max_running_and_max_queued_are_at_most_the_nearest_enclosing_queues(
    field: str, attribute: str
) -> None:
    tree, bounded = _tree(
        [{**TEAM_A, field: 5}, TEAM_B],
        {
            "team-a": [{"name": "team-a/x", field: 50}, {"name": "team-a/y", field: 3}],
            "team-a/x": [{"name": "team-a/x/p", field: 500}],
        },
    )
    assert getattr(_entry(tree, "team-a/x"), attribute) == 5
    assert getattr(_entry(tree, "team-a/y"), attribute) == 3
    assert getattr(_entry(tree, "team-a/x/p"), attribute) == 5  # through team-a/x, bounded
    assert sorted(b.queue for b in bounded) == ["team-a/x", "team-a/x/p"]
    assert {b.note.file for b in bounded} == {"team-a/_queues.yaml", "team-a/x/_queues.yaml"}


def test_a_deeper_file_is_bounded_by_its_parents_bounded_values() -> None:
    tree, bounded = _tree(
        [{**TEAM_A, "preemption": {"reclaimWithinCohort": "LowerPriority"}}, TEAM_B],
        {
            "team-a": [{"name": "team-a/x", "preemption": {"withinQueue": "LowerPriority"}}],
            "team-a/x": [
                {"name": "team-a/x/p", "preemption": {"reclaimWithinCohort": "Any"}},
            ],
        },
    )
    policy = effective_policy(tree)
    assert policy["team-a/x"]["preemption"]["withinQueue"] == "Never"
    # team-a/x asked no reclaim, so it has none to give its own sub-queue
    assert policy["team-a/x/p"]["preemption"]["reclaimWithinCohort"] == "Never"
    assert sorted(b.queue for b in bounded) == ["team-a/x", "team-a/x/p"]


def test_a_file_that_nests_in_itself_bounds_its_deeper_queues_by_its_bounded_ones() -> None:
    tree, _ = _tree(
        [{**TEAM_A, "preemption": {"withinQueue": "LowerPriority"}}, TEAM_B],
        {
            "team-a": [  # the deeper queue first: the order in the file does not matter
                {"name": "team-a/x/p", "nominalQuota": {"cpu": 100}},
                {"name": "team-a/x", "nominalQuota": {"cpu": 100}},
            ]
        },
    )
    assert _entry(tree, "team-a/x").nominal_quota.cpu == 8
    assert _entry(tree, "team-a/x/p").nominal_quota.cpu == 8


def test_weight_and_lending_limit_are_the_teams_to_divide() -> None:
    tree, bounded = _tree(
        [{**TEAM_A, "weight": 1}, TEAM_B],
        {"team-a": [{"name": "team-a/x", "weight": 1000, "lendingLimit": {"cpu": 0}}]},
    )
    assert _entry(tree, "team-a/x").weight == 1000
    assert _entry(tree, "team-a/x").lending_limit.cpu == 0
    assert bounded == []


def test_the_top_file_is_the_admins_and_is_not_bounded() -> None:
    sub = {
        "name": "team-a/x",
        "nominalQuota": {"cpu": 100},
        "preemption": {"reclaimWithinCohort": "Any"},
    }
    tree, bounded = _tree([TEAM_A, sub, TEAM_B], {})
    assert _entry(tree, "team-a/x").preemption.reclaim_within_cohort == "Any"
    assert _entry(tree, "team-a/x").nominal_quota.cpu == 100
    assert bounded == []


def test_the_note_names_file_line_field_and_what_the_parent_grants() -> None:
    _, [note] = _tree(
        [TEAM_A, TEAM_B],
        {"team-a": [{"name": "team-a/x", "preemption": {"reclaimWithinCohort": "Any"}}]},
    )
    assert str(note.note) == (
        "team-a/_queues.yaml:7:28: spec.queues[0].preemption.reclaimWithinCohort: Any goes "
        "beyond what its parent grants (team-a has reclaimWithinCohort Never); in force: Never"
    )
    assert note.document() == {
        "field": "preemption.reclaimWithinCohort",
        "written": "Any",
        "inForce": "Never",
        "message": str(note.note),
    }


def test_the_effective_policy_lists_every_queue_with_its_bounded_fields() -> None:
    tree, bounded = _tree(
        [{**TEAM_A, "borrowingLimit": {"cpu": 4, "memory": "1Gi"}}, TEAM_B],
        {"team-a": [{"name": "team-a/x", "preemption": {"withinQueue": "LowerPriority"}}]},
    )
    policy = effective_policy(tree, bounded)
    assert list(policy) == ["team-a", "team-b", "team-a/x", "default"]
    assert policy["team-a"]["borrowingLimit"] == {"cpu": 4, "memory": "1Gi"}
    assert policy["team-b"]["borrowingLimit"] == {}
    assert "bounded" not in policy["team-a"]
    [item] = policy["team-a/x"]["bounded"]
    assert (item["field"], item["written"], item["inForce"]) == (
        "preemption.withinQueue",
        "LowerPriority",
        "Never",
    )


def test_the_defaults_of_a_preemption_block_are_the_planner_settings_defaults() -> None:
    settings = PlannerSettings()
    assert dataclasses.asdict(settings)["preemption"] == DEFAULT_PREEMPTION.within_queue
    assert DEFAULT_PREEMPTION.reclaim_within_cohort == "Never"
    assert DEFAULT_PREEMPTION.grace_period_seconds == settings.preemption_grace_seconds
    assert DEFAULT_PREEMPTION.min_runtime_seconds == settings.preemption_min_runtime_seconds
    assert DEFAULT_PREEMPTION.max_per_task == settings.preemption_max_per_task
    assert DEFAULT_PREEMPTION.min_preemptor_priority == (settings.preemption_min_preemptor_priority)


# (the parent's overuse block, the sub-queue's, what is in force, the fields noted)
OVERUSE = [
    ({"overuse": "Stop"}, {"overuse": "Charge"}, ("Stop", 300.0), ["overuse"]),
    ({"overuse": "Stop"}, {"overuse": "Warn"}, ("Stop", 300.0), ["overuse"]),
    ({}, {"overuse": "Warn"}, ("Charge", 300.0), ["overuse"]),  # the parent's default bounds it
    ({"overuse": "Stop"}, {}, ("Stop", 300.0), []),  # left out: the parent's, with no note
    (
        {"overuse": "Stop", "overuseGraceSeconds": 60},
        {"overuseGraceSeconds": 600},
        ("Stop", 60.0),
        ["overuseGraceSeconds"],
    ),
    ({"overuse": "Warn"}, {"overuse": "Stop"}, ("Stop", 300.0), []),  # stricter: kept
    ({}, {"overuse": "Stop", "overuseGraceSeconds": 5}, ("Stop", 5.0), []),
]


@pytest.mark.parametrize(("parent", "asked", "kept", "noted"), OVERUSE)
def test_a_team_may_only_hold_its_runs_to_their_declarations_more_strictly(
    parent: dict[str, Any], asked: dict[str, Any], kept: tuple[str, float], noted: list[str]
) -> None:
    tree, bounded = _tree(
        [{**TEAM_A, **parent}, TEAM_B], {"team-a": [{"name": "team-a/x", **asked}]}
    )
    policy = tree.overuse_of("team-a/x")
    assert (policy.mode, policy.grace_seconds) == kept
    assert [b.field for b in bounded] == noted
    shown = effective_policy(tree)["team-a/x"]["overuse"]
    assert shown == {"mode": kept[0], "graceSeconds": kept[1]}
