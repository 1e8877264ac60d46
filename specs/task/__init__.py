"""The task vocabulary: the spec a user writes, the status we write back, the records the
loop carries, and their parts (pipelines, arrays, quantities, submission ids, the JSON Schema).

One record per boundary: a spec file as read is a TaskInput (inputs.py), its task a Task with
its TaskSpec (records.py); a status is a TaskStatus with its TaskStatusBody (status.py). The
pydantic models (TaskModel, TaskSpecModel in models.py; TaskStatusModel, TaskStatusBodyModel
in status.py) are the files' schema: only the reader and writer of files and the published
JSON Schema use them, so they are not exported here."""

from specs.task.arrays import RERUN_ELEMENTS, element_name, order_key, rerun_elements, split
from specs.task.errors import SpecError
from specs.task.inputs import TaskInput
from specs.task.models import (
    API_VERSION,
    ARRAY_LIMIT_VAR,
    ARRAY_SIZE_VAR,
    FINISHED,
    MAX_ARRAY_ELEMENTS,
    NO_DEPENDENCIES,
    NO_METADATA,
    RESTARTED_AT,
    Condition,
    ConditionType,
    Metadata,
    Phase,
    Reason,
    Resources,
    SourceRef,
    format_timestamp,
    known_resources,
    read_reason,
    request_capacity,
    shared_resources,
)
from specs.task.pipeline import DependencySpec, RetrySpec
from specs.task.quantity import (
    GIB,
    MAX_BYTES,
    QuantityError,
    format_memory,
    human_memory,
    parse_memory,
    plural,
    readable_count,
    readable_memory,
    readable_resources,
)
from specs.task.records import NameMetadata, Task, TaskSpec
from specs.task.schema import render_schema, task_schema
from specs.task.status import TaskStatus, TaskStatusBody
from specs.task.submission_ids import (
    MAX_LENGTH,
    RESERVED_PREFIX,
    SCHEMA_PATTERN,
    bases,
    cleaned,
    problem,
    unsubmittable,
    users,
    uses,
)

__all__ = [
    "API_VERSION",
    "ARRAY_LIMIT_VAR",
    "ARRAY_SIZE_VAR",
    "FINISHED",
    "GIB",
    "MAX_ARRAY_ELEMENTS",
    "MAX_BYTES",
    "MAX_LENGTH",
    "NO_DEPENDENCIES",
    "NO_METADATA",
    "RERUN_ELEMENTS",
    "RESERVED_PREFIX",
    "RESTARTED_AT",
    "SCHEMA_PATTERN",
    "Condition",
    "ConditionType",
    "DependencySpec",
    "Metadata",
    "NameMetadata",
    "Phase",
    "QuantityError",
    "Reason",
    "Resources",
    "RetrySpec",
    "SourceRef",
    "SpecError",
    "Task",
    "TaskInput",
    "TaskSpec",
    "TaskStatus",
    "TaskStatusBody",
    "bases",
    "cleaned",
    "element_name",
    "format_memory",
    "format_timestamp",
    "human_memory",
    "known_resources",
    "order_key",
    "parse_memory",
    "plural",
    "problem",
    "read_reason",
    "readable_count",
    "readable_memory",
    "readable_resources",
    "render_schema",
    "request_capacity",
    "rerun_elements",
    "shared_resources",
    "split",
    "task_schema",
    "unsubmittable",
    "users",
    "uses",
]
