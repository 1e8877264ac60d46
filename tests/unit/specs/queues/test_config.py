"""_queues.yaml: parsing, errors with lines, folder -> queue mapping, reserved task names."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.cluster import Capacity
from specs.folder.store import InvalidName, TaskStore, validate_name
from specs.queues.config import DEFAULT_QUEUE, Overuse, parse_capacity
from specs.queues.parse import parse_queue_config
from specs.yamlio.parse import SpecParseError

GOOD = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 64, gpu: 8, memory: 256Gi}
      borrowingLimit: {gpu: 4}
      lendingLimit: {cpu: 32}
      weight: 1
    - name: team-b
      nominalQuota: {cpu: 32}
    - name: org/team-c
      weight: 3
  default: {}
"""


def test_parses_the_documented_example() -> None:
    config = parse_queue_config(GOOD)
    a, b, c = config.spec.queues
    assert a.nominal_quota.memory == 256 * 2**30
    assert a.borrowing_limit.capacity().gpu == 4
    assert a.borrowing_limit.capacity().cpu == float("inf")  # absent: no limit
    assert a.lending_limit.cpu == 32 and a.lending_limit.gpu is None
    assert b.weight == 1 and c.weight == 3 and c.nominal_quota.cpu == 0
    assert config.queue_names() == ["team-a", "team-b", "org/team-c", DEFAULT_QUEUE]


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        ("team-a/x", "team-a"),
        ("team-a/x/y", "team-a"),
        ("team-a", DEFAULT_QUEUE),  # a file beside the folder is not under it
        ("team-ab/x", DEFAULT_QUEUE),
        ("org/team-c/deep/t", "org/team-c"),
        ("org/other", DEFAULT_QUEUE),
        ("hello", DEFAULT_QUEUE),
    ],
)
def test_queue_of_is_the_longest_listed_folder(task: str, queue: str) -> None:
    assert parse_queue_config(GOOD).queue_of(task) == queue


def test_longest_prefix_wins_over_a_parent_folder() -> None:
    text = GOOD.replace("org/team-c", "team-a/vision")
    config = parse_queue_config(text)
    assert config.queue_of("team-a/vision/t") == "team-a/vision"
    assert config.queue_of("team-a/nlp/t") == "team-a"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("lendingLimit:", "lendinglimit:"),
            "_queues.yaml:8:7: spec.queues[0].lendinglimit: unknown field",
        ),
        (
            ("{cpu: 32}\n    - name: org", "{cpu: -2}\n    - name: org"),
            "_queues.yaml:11:27: spec.queues[1].nominalQuota.cpu: must be greater than or equal "
            "to 0 (got -2)",
        ),
        (
            ("memory: 256Gi", "memory: -1Gi"),
            "_queues.yaml:6:47: spec.queues[0].nominalQuota.memory: '-1Gi' is not a quantity",
        ),
        (
            ("name: team-b", "name: team-a"),
            '_queues.yaml:10:13: spec.queues[1].name: queue "team-a" is listed twice '
            "(first as queues[0])",
        ),
        (
            ("name: team-b", "name: ../team-b"),
            "_queues.yaml:10:13: spec.queues[1].name: queue name '../team-b' must be a folder path",
        ),
        (("name: team-b", "name: /abs"), "spec.queues[1].name: queue name '/abs' must be"),
        (("name: team-b", "name: a\\\\b"), "must use '/' between folders"),
        (("name: team-b", "name: default"), '"default" is the queue of unlisted folders'),
        (("weight: 3", "weight: 0"), "spec.queues[2].weight: must be greater than 0"),
        (("weight: 3", "weight: -1"), "spec.queues[2].weight: must be greater than 0"),
        (("kind: QueueConfig", "kind: Task"), "kind:"),
        (("default: {}", "default: {nominalQuota: {cpu: 1}}"), "unknown field"),
    ],
)
def test_errors_name_file_line_and_field(edit: tuple[str, str], expected: str) -> None:
    text = GOOD.replace(*edit)
    assert text != GOOD
    with pytest.raises(SpecParseError) as info:
        parse_queue_config(text)
    assert expected in str(info.value)


def test_broken_yaml_is_a_clean_error() -> None:
    with pytest.raises(SpecParseError, match=r"_queues.yaml:\d+:\d+"):
        parse_queue_config("spec: [\n")
    with pytest.raises(SpecParseError, match="empty file"):
        parse_queue_config("")


def test_a_folder_that_does_not_exist_yet_is_fine(tmp_path: Path) -> None:
    config = parse_queue_config(GOOD)
    assert not (tmp_path / "team-a").exists()
    assert config.queue_of("team-a/t") == "team-a"


def test_underscore_files_are_invalid_tasks_and_the_config_is_not_a_task(tmp_path: Path) -> None:
    (tmp_path / "_queues.yaml").write_text(GOOD)
    (tmp_path / "_queues.status.yaml").write_text("queues: {}\n")
    (tmp_path / "team-a").mkdir()
    (tmp_path / "team-a" / "_draft.yaml").write_text("kind: Task\n")
    store = TaskStore(tmp_path, settle_seconds=0)
    entries = store.scan()
    assert set(entries) == {"team-a/_draft"}
    error = entries["team-a/_draft"].error
    assert entries["team-a/_draft"].task is None and error is not None
    assert "reserved for configuration" in str(error)
    assert store.read_statuses() == {}
    with pytest.raises(InvalidName, match="reserved"):
        validate_name("team-a/_x")


PREEMPTING = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 4}
      preemption:
        withinQueue: LowerPriority
        reclaimWithinCohort: Any
        gracePeriodSeconds: 45
        minRuntimeSeconds: 600
        minPreemptorPriority: 7
    - name: team-b
  default:
    preemption: {reclaimWithinCohort: LowerPriority}
"""


def test_preemption_blocks_parse_and_omitted_fields_stay_unset() -> None:
    config = parse_queue_config(PREEMPTING)
    a = config.preemption_of("team-a")
    assert (a.within_queue, a.reclaim_within_cohort) == ("LowerPriority", "Any")
    assert (a.grace_period_seconds, a.min_runtime_seconds) == (45, 600)
    assert a.min_preemptor_priority == 7
    b = config.preemption_of("team-b")
    assert b.within_queue is None and b.grace_period_seconds is None  # the flags fill these
    assert b.min_preemptor_priority is None
    assert config.preemption_of(DEFAULT_QUEUE).reclaim_within_cohort == "LowerPriority"
    assert config.preemption_of("nowhere").within_queue is None


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("withinQueue: LowerPriority", "withinQueue: Any"),
            "_queues.yaml:8:22: spec.queues[0].preemption.withinQueue: must be 'Never' or "
            "'LowerPriority' (got 'Any')",
        ),
        (
            ("reclaimWithinCohort: Any", "reclaimWithinCohort: Always"),
            "_queues.yaml:9:30: spec.queues[0].preemption.reclaimWithinCohort: must be 'Never', "
            "'LowerPriority' or 'Any' (got 'Always')",
        ),
        (
            ("gracePeriodSeconds: 45", "gracePeriodSeconds: -1"),
            "_queues.yaml:10:29: spec.queues[0].preemption.gracePeriodSeconds: must be greater "
            "than or equal to 0 (got -1)",
        ),
        (
            ("minRuntimeSeconds: 600", "minRuntimeSeconds: .inf"),
            "_queues.yaml:11:28: spec.queues[0].preemption.minRuntimeSeconds: must be a finite "
            "number (got inf)",
        ),
        (
            ("minRuntimeSeconds: 600", "minRuntime: 600"),
            "_queues.yaml:11:9: spec.queues[0].preemption.minRuntime: unknown field",
        ),
        (
            ("minPreemptorPriority: 7", "minPreemptorPriority: 10"),
            "_queues.yaml:12:31: spec.queues[0].preemption.minPreemptorPriority: must be less "
            "than or equal to 9 (got 10)",
        ),
        (
            ("minPreemptorPriority: 7", "minPreemptorPriority: -1"),
            "_queues.yaml:12:31: spec.queues[0].preemption.minPreemptorPriority: must be greater "
            "than or equal to 0 (got -1)",
        ),
        (
            ("minPreemptorPriority: 7", "minPreemptorPriority: 7.5"),
            "_queues.yaml:12:31: spec.queues[0].preemption.minPreemptorPriority: must be a valid "
            "integer, got a number with a fractional part (got 7.5)",
        ),
        (
            ("{reclaimWithinCohort: LowerPriority}", "{withinQueue: Sometimes}"),
            "_queues.yaml:15:31: spec.default.preemption.withinQueue: must be 'Never' or "
            "'LowerPriority' (got 'Sometimes')",
        ),
    ],
)
def test_preemption_errors_name_the_field(edit: tuple[str, str], expected: str) -> None:
    with pytest.raises(SpecParseError) as info:
        parse_queue_config(PREEMPTING.replace(*edit))
    assert str(info.value) == expected


# --- spec.cluster: what an autoscaling cluster can grow to -----------------------------------

CLUSTER = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  cluster:
    maxCapacity: {cpu: 64, gpu: 8, memory: 512Gi}
    nodeTypes:
      - name: head
        resources: {cpu: 4, memory: 16Gi}
        maxCount: 1
        minCount: 1
      - name: gpu-worker
        resources: {cpu: 8, gpu: 1, memory: 64Gi}
        maxCount: 4
"""


def test_the_cluster_section_parses() -> None:
    section = parse_queue_config(CLUSTER).spec.cluster
    assert section is not None
    cap = section.max_capacity_value()
    assert cap is not None and (cap.cpu, cap.gpu, cap.memory) == (64, 8, 512 * 2**30)
    kinds = section.node_type_values()
    assert [(k.name, k.max_count, k.min_count) for k in kinds] == [
        ("head", 1, 1),
        ("gpu-worker", 4, 0),
    ]
    assert kinds[1].resources.gpu == 1


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("maxCount: 4", "maxCount: -4"), "_queues.yaml:13:19: spec.cluster.nodeTypes[1].maxCount"),
        (
            ("name: gpu-worker", "name: head"),
            '_queues.yaml:11:15: spec.cluster.nodeTypes[1].name: node type "head" is listed '
            "twice (first as nodeTypes[0])",
        ),
        (
            ("minCount: 1", "minCount: 2"),
            "_queues.yaml:10:19: spec.cluster.nodeTypes[0].minCount: minCount 2 is more than "
            "maxCount 1",
        ),
        (
            ("{cpu: 64,", "{cpus: 64,"),
            "_queues.yaml:5:19: spec.cluster.maxCapacity.cpus: unknown field",
        ),
        (
            ("memory: 512Gi", "memory: lots"),
            "_queues.yaml:5:44: spec.cluster.maxCapacity.memory: 'lots' is not",
        ),
    ],
)
def test_cluster_errors_name_file_line_and_field(edit: tuple[str, str], expected: str) -> None:
    with pytest.raises(SpecParseError) as err:
        parse_queue_config(CLUSTER.replace(*edit))
    assert str(err.value).startswith(expected), str(err.value)


def test_the_max_capacity_flag_parses_and_refuses_nonsense() -> None:
    assert parse_capacity("cpu=64,gpu=8,memory=512Gi") == Capacity(64, 8, 512 * 2**30)
    inf = float("inf")  # a resource left out is not capped
    assert parse_capacity("gpu=2") == Capacity(inf, 2, inf)
    for bad, why in [
        ("cpu=64,cpu=2", "given twice"),
        ("cores=4", "is not cpu=N"),
        ("cpu=-1", ">= 0"),
        ("cpu=nan", ">= 0"),
        ("memory=lots", "memory=lots"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_capacity(bad)


def test_overuse_defaults_to_charge_and_parses_each_policy() -> None:
    config = parse_queue_config(
        GOOD.replace("      weight: 1\n", "      weight: 1\n      overuse: Stop\n")
        .replace("nominalQuota: {cpu: 32}", "nominalQuota: {cpu: 32}\n      overuse: Warn")
        .replace("default: {}", "default: {overuse: Stop, overuseGraceSeconds: 60}")
    )
    assert config.overuse_of("team-a") == Overuse("Stop", 300.0)
    assert config.overuse_of("team-b") == Overuse("Warn", 300.0)
    assert config.overuse_of("org/team-c") == Overuse("Charge", 300.0)
    assert config.overuse_of(DEFAULT_QUEUE) == Overuse("Stop", 60.0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("overuse: Kill", "spec.default.overuse:"),
        ("overuseGraceSeconds: -1", "spec.default.overuseGraceSeconds: must be greater than"),
    ],
)
def test_overuse_errors_name_the_field(value: str, expected: str) -> None:
    with pytest.raises(SpecParseError) as info:
        parse_queue_config(GOOD.replace("default: {}", f"default: {{{value}}}"))
    assert expected in str(info.value)
