"""spec.submissionId is a name, never a path: the rule, its messages, and the `-<run>` forms."""

from __future__ import annotations

import pytest

from specs.task import submission_ids
from specs.yamlio.parse import SpecParseError, parse_task

HEAD = "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: x\n  resources: {cpu: 1}\n"


def _errors(sid_yaml: str) -> list[str]:
    with pytest.raises(SpecParseError) as caught:
        parse_task((HEAD + f"  submissionId: {sid_yaml}\n").encode(), file="team-a/t.yaml")
    return [str(e) for e in caught.value.errors]


@pytest.mark.parametrize(
    "sid",
    ["train-1", "mlumina-job-priority-3-1cpu-0gpu-4memory-0b9c", "a", "A.b_c-D", "x" * 200],
)
def test_a_plain_name_is_accepted(sid: str) -> None:
    task = parse_task((HEAD + f"  submissionId: '{sid}'\n").encode(), file="t.yaml")
    assert task.spec.submission_id == sid


@pytest.mark.parametrize(
    ("sid_yaml", "why"),
    [
        # The attack: another team's derived id plus a path that Ray routed as a stop.
        ("'rq-team-b.train-abc-1/stop?'", "only letters, digits"),
        ("'team-b/x'", "only letters, digits"),
        ("'a?b'", "only letters, digits"),
        ("'a#b'", "only letters, digits"),
        ("'a%2Fb'", "only letters, digits"),
        ("'a b'", "only letters, digits"),
        ("'a\\tb'", "only letters, digits"),
        ('"caf\\u00e9"', "only letters, digits"),
        ("'.'", "must not be '.' or '..'"),
        ("'..'", "must not be '.' or '..'"),
        ("'rq-train-0a1b2c3d-1'", "must not start with 'rq-'"),
        ("'x" + "y" * 200 + "'", "at most 200 characters"),
    ],
)
def test_an_id_outside_the_rule_names_the_field_and_the_line(sid_yaml: str, why: str) -> None:
    (error,) = _errors(sid_yaml)
    assert error.startswith("team-a/t.yaml:6:17: spec.submissionId: "), error
    assert why in error


def test_the_schema_pattern_agrees_with_the_rule() -> None:
    import re

    pattern = re.compile(submission_ids.SCHEMA_PATTERN)
    for sid in ["ok-1", "a.b", "rq-x", ".", "..", "a/b", "a b", "...", "rq", "RQ-x"]:
        assert (pattern.search(sid) is not None) == (submission_ids.problem(sid) is None), sid


@pytest.mark.parametrize(
    ("recorded", "explicit", "used"),
    [
        ("train", "train", True),
        ("train-2", "train", True),
        ("train-17", "train", True),
        ("train-", "train", False),
        ("train-2x", "train", False),
        ("trainer", "train", False),
        ("train-b", "train", False),
        ("other", "train", False),
    ],
)
def test_a_later_run_uses_the_explicit_id(recorded: str, explicit: str, used: bool) -> None:
    assert submission_ids.uses(recorded, explicit) is used


def test_cleaned_keeps_the_rule_and_the_uuid_at_the_end() -> None:
    old = "mlumina-my job/ä-priority-1-1cpu-0gpu-1memory-" + "0b9c0ef2-1111-4222-8333-944445555666"
    clean = submission_ids.cleaned(old)
    assert submission_ids.problem(clean) is None
    assert clean.endswith("0b9c0ef2-1111-4222-8333-944445555666")
    long = "mlumina-" + "n" * 300 + "-0b9c0ef2-1111-4222-8333-944445555666"
    assert len(submission_ids.cleaned(long)) == submission_ids.MAX_LENGTH
    assert submission_ids.cleaned(long).endswith("0b9c0ef2-1111-4222-8333-944445555666")
