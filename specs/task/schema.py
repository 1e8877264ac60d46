"""The JSON Schema of a task spec, generated from the pydantic models for editors and CI.

`specs/task.schema.json` is the committed output of `render_schema()`; a test fails when the
two differ, so run `rayqueue schema > specs/task.schema.json` after changing the models.

The schema is draft-07 with `definitions`, the dialect every YAML language server understands.
A few rules live in validators rather than in field types (memory quantities, "at least one
resource", a non-blank entrypoint); they are described here so editors can flag them too.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import GenerateJsonSchema

from specs.task import quantity
from specs.task.models import API_VERSION, RESTARTED_AT, TaskModel

SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"

# Hover texts, by definition and property. Kept here so the models stay about validation.
_DESCRIPTIONS: dict[str, dict[str, str]] = {
    "Task": {
        "apiVersion": f"Always {API_VERSION}.",
        "kind": "Always Task.",
        "metadata": "Name, labels and annotations.",
        "spec": "What to run, how urgently, and what it reserves.",
    },
    "Metadata": {
        "name": "Optional. If present it must equal the file's stem (train.yaml: train).",
        "labels": "String to string; select with `rayqueue get -l key=value`.",
        "annotations": (
            f"String to string. A new value of `{RESTARTED_AT}` starts a new run "
            "(`rayqueue rerun NAME` sets it)."
        ),
    },
    "TaskSpec": {
        "entrypoint": "Shell command run by the Ray job, as for `ray job submit`. Required.",
        "runtimeEnv": (
            "Handed to Ray as runtime_env, unchanged. A relative working_dir is resolved "
            "against the directory `rayqueue serve` runs in."
        ),
        "priority": "0..9, default 0; 9 runs first. Changes apply in place, without a new run.",
        "resources": (
            "The reservation for the whole job, counted against the cluster's capacity. "
            "At least one of cpu, gpu and memory must be more than 0."
        ),
        "timeoutSeconds": "Stop the job after this many seconds of running; 0: no timeout.",
        "suspend": "true: do not run, and stop the job if it runs. Back to false: a new run.",
        "submissionId": "Ray submission id of the first run; later runs add -2, -3, ...",
        "maxLostRestarts": (
            "Deprecated: a retry policy for lost runs only (default 1, no delay, every lost "
            "run counts). Use retry, with Lost in retry.on; the two cannot be combined."
        ),
        "retry": "Retries with backoff: which outcomes are tried again, how often, how late.",
        "dependsOn": (
            "Tasks whose latest run must end first (all of them). Editing this list never "
            "restarts a run."
        ),
        "preemptible": (
            "false: never stopped to make room for more urgent work (default true). "
            "See `--preemption`."
        ),
        "resumable": (
            "true: the task saves its state when it gets SIGTERM (within the grace period) and "
            "resumes on its next run, told by RAYQUEUE_PREEMPTED=1; it is preempted first, as "
            "it loses only the grace period (default false). Editing it never restarts a run."
        ),
        "array": (
            "Run this task as many elements (NAME[0], NAME[1], ...): give one of matrix, count "
            "and values. Each element is a run of its own, with its own retries and timeout."
        ),
    },
    "ArraySpec": {
        "matrix": (
            "Variable name to a list of values; one element per combination (their product), "
            "each given its values as environment variables."
        ),
        "count": "This many elements, 0..count-1, told apart by RAYQUEUE_ARRAY_INDEX.",
        "values": "An explicit list of elements, each a mapping of environment variables.",
        "maxParallel": "At most this many elements Starting or Running at once; no limit if unset.",
    },
    "RetrySpec": {
        "limit": "Runs after the first; 0 (default): none.",
        "backoffSeconds": "Delay before the first retry (default 10).",
        "factor": "Each further delay is multiplied by this (default 2; at least 1).",
        "maxBackoffSeconds": "No delay is longer than this (default 600).",
        "on": "Outcomes that are retried: Failed, Lost, TimedOut (default Failed and Lost).",
        "nonRetryableExitCodes": "A run whose driver exits with one of these is final.",
    },
    "DependencySpec": {
        "name": "A task name, as `rayqueue get` shows it (team-a/preprocess).",
        "condition": (
            "Succeeded (default), Failed (any end but success) or Finished (any end) of "
            "the dependency's latest run."
        ),
    },
    "Resources": {
        "cpu": "CPUs, may be fractional.",
        "gpu": "GPUs, may be fractional.",
        "memory": "A quantity (512Mi, 4Gi, 2G, 1024B) or a bare number of GiB.",
    },
}


class _Generator(GenerateJsonSchema):
    def field_title_should_be_set(self, schema: Any) -> bool:
        # Titles derived from field names ("Timeoutseconds") read worse than no title.
        return False

    def normalize_name(self, name: str) -> str:
        # The file's models are TaskModel and TaskSpecModel (Task and TaskSpec are the lean
        # records the loop keeps); the schema keeps the names a spec's writer knows.
        return _NAMES.get(name, super().normalize_name(name))


_NAMES = {"TaskModel": "Task", "TaskSpecModel": "TaskSpec"}


def task_schema() -> dict[str, Any]:
    """The JSON Schema (draft-07) of a rayqueue/v1 Task document."""
    schema = TaskModel.model_json_schema(
        by_alias=True,
        mode="validation",
        ref_template="#/definitions/{model}",
        schema_generator=_Generator,
    )
    definitions: dict[str, Any] = schema.pop("$defs")
    definitions["Task"] = schema
    for model, texts in _DESCRIPTIONS.items():
        properties = definitions[model]["properties"]
        for prop, text in texts.items():
            properties[prop]["description"] = text

    for model in ("Resources", "Bundle"):
        memory = definitions[model]["properties"]["memory"]
        # The field holds bytes, but a spec writes a number of GiB or a quantity string.
        memory.pop("type")
        memory["description"] = _DESCRIPTIONS["Resources"]["memory"]
        memory["anyOf"] = [
            {"type": "number", "minimum": 0},
            {"type": "string", "pattern": quantity._QUANTITY.pattern},
        ]
    definitions["Resources"]["properties"]["bundles"]["description"] = (
        "On an autoscaling cluster: how the task spreads over nodes, each bundle on one node; "
        "together they must hold at least the resources above."
    )
    spec = definitions["TaskSpec"]
    spec["properties"]["entrypoint"]["pattern"] = r"\S"  # not blank
    # A task with no resources is invalid, so an editor should ask for the block.
    spec["required"] = [*spec["required"], "resources"]
    definitions["Resources"]["minProperties"] = 1

    top = definitions.pop("Task")
    return {
        "$schema": SCHEMA_DIALECT,
        "title": "rayqueue Task",
        "description": (
            "One task of the rayqueue job queue: a YAML file in the tasks folder. "
            "Generated from specs/task/models.py by specs/task/schema.py; do not edit."
        ),
        **{k: v for k, v in top.items() if k != "title"},
        "definitions": dict(sorted(definitions.items())),
    }


def render_schema() -> str:
    """The schema as committed in specs/task.schema.json: stable key order, trailing newline."""
    return json.dumps(task_schema(), indent=2, ensure_ascii=False) + "\n"
