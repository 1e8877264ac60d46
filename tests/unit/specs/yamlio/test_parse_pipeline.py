"""spec.retry and spec.dependsOn through the parser: values, and line-numbered errors."""

from __future__ import annotations

import pytest

from specs.yamlio.parse import SpecParseError, dump_task, parse_task

HEAD = "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: python train.py\n"
HEAD += "  resources: {cpu: 1}\n"  # the lines below start at line 6


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("  retry:\n    limit: -1\n",
         "team-a/train.yaml:7:12: spec.retry.limit: must be greater than or equal to 0 (got -1)"),
        ("  retry:\n    limit: 2\n    factor: 0.5\n",
         "team-a/train.yaml:8:13: spec.retry.factor: must be greater than or equal to 1 (got 0.5)"),
        ("  dependsOn:\n    - name: prep\n    - name: team-a/train\n",
         'team-a/train.yaml:8:13: spec.dependsOn[1].name: a task cannot depend on itself '
         '("team-a/train")'),
        ("  dependsOn:\n    - name: prep\n      condition: Done\n",
         "team-a/train.yaml:8:18: spec.dependsOn[0].condition: must be 'Succeeded', 'Failed' "
         "or 'Finished' (got 'Done')"),
        ("  retry:\n    on: [Failed, Crashed]\n",
         "team-a/train.yaml:7:18: spec.retry.on[1]: must be 'Failed', 'Lost' or 'TimedOut' "
         "(got 'Crashed')"),
        ("  maxLostRestarts: 2\n  retry: {limit: 1}\n",
         "team-a/train.yaml:7:10: spec.retry: cannot be combined with the deprecated "
         "maxLostRestarts; put Lost into retry.on instead"),
        ("  dependsOn:\n    - name: prep\n    - name: prep\n",
         "team-a/train.yaml:7:5: spec.dependsOn: dependsOn names prep more than once"),
    ],
)  # fmt: skip
def test_invalid_values_are_line_numbered(extra: str, expected: str) -> None:
    with pytest.raises(SpecParseError) as info:
        parse_task(HEAD + extra, file="team-a/train.yaml", expected_name="train",
                   task_name="team-a/train")  # fmt: skip
    assert str(info.value) == expected


def test_the_issue_example_parses_with_an_unquoted_on_key_and_round_trips() -> None:
    text = HEAD + (
        "  retry:\n    limit: 3\n    backoffSeconds: 10\n    factor: 2\n"
        "    maxBackoffSeconds: 600\n    on: [Failed, Lost]\n    nonRetryableExitCodes: [2]\n"
        "  dependsOn:\n    - name: team-a/preprocess\n      condition: Succeeded\n"
        "    - name: other\n"
    )
    task = parse_task(text, file="train.yaml", task_name="train")
    retry = task.spec.retry
    assert retry is not None
    assert (retry.limit, retry.backoff_seconds, retry.factor, retry.max_backoff_seconds) == (
        3, 10, 2, 600)  # fmt: skip
    assert retry.on == ["Failed", "Lost"] and retry.non_retryable_exit_codes == [2]
    assert [(d.name, d.condition) for d in task.spec.depends_on] == [
        ("team-a/preprocess", "Succeeded"), ("other", "Succeeded")]  # fmt: skip
    again = parse_task(dump_task(task), file="train.yaml", task_name="train")
    assert again == task
    # Neither field is run-defining: editing them never restarts a run.
    assert again.spec_hash() == parse_task(HEAD, file="train.yaml").spec_hash()
