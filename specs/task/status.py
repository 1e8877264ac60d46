"""A task's status: the one record of it (TaskStatus, with its TaskStatusBody), which the
store, the loop, the planner and the views all hold; and the sidecar's schema, the pydantic
models (TaskStatusModel, TaskStatusBodyModel) that only the file boundary uses: the reader
(specs.yamlio.parse) validates a sidecar with them, and the writer (specs.yamlio.dump) takes
their field order. The records have the same fields and defaults; `to_document` writes what
those models write."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from specs.task.models import (
    API_VERSION,
    Condition,
    DocumentModel,
    Metadata,
    Phase,
    SourceRef,
    Timestamp,
    format_timestamp,
)
from specs.task.records import NameMetadata, name_metadata


class TaskStatusBodyModel(DocumentModel):
    """A status body as read from and written to a sidecar (validation at the file boundary).
    Inside the loop a status is the lean TaskStatusBody (specs/task/status.py), with the
    same fields."""

    model_config = ConfigDict(extra="ignore")  # sidecars with fields we do not know still load

    phase: Phase
    reason: str | None = None
    message: str | None = None
    queue: str | None = None  # the team queue, when _queues.yaml configures queues
    queue_position: int | None = None  # exact for the first exact_queue_positions of a queue
    # Beyond them, a bucket such as ">1000" (docs/scheduling.md, "Queue positions"): a start at
    # the head then rewrites the few sidecars whose bucket changes, not every waiting one.
    queue_position_bucket: str | None = None
    estimated_start_at: Timestamp | None = None
    uid: str | None = None  # fixed at first sight; keeps ids unique if a task is re-created
    run: int = 0  # runs started so far; part of each run's submission id
    submission_id: str | None = None
    spec_hash: str | None = None
    ray_status: str | None = None
    queued_at: Timestamp | None = None
    # On an autoscaling cluster: when this wait's request for nodes began (WaitingForScaleUp);
    # kept through its ScaleUpTimeout backoff, cleared when it leaves the queue.
    scale_up_requested_at: Timestamp | None = None
    submitted_at: Timestamp | None = None
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    # When Ray stopped listing the running job; cleared by every other transition. Sidecars of the
    # earlier format keep this time in finishedAt (with reason JobMissing): see
    # lifecycle.missing_since.
    missing_since: Timestamp | None = None
    lost_restarts: int = 0  # sidecars from before `retries`: the retries of maxLostRestarts
    retries: int = 0  # retries used since the user last asked for a run
    next_retry_at: Timestamp | None = None  # during RetryBackoff: the retry's earliest start
    exit_code: int | None = None  # the driver's, of the finished run (Ray's driver_exit_code)
    # Preemption: how often the task lost a run to more urgent work (never a failure), and,
    # until its next run is admitted, which task took it (the Preempted condition holds).
    preemptions: int = 0
    preempted_by: str | None = None
    # The current run follows a preemption: its job is told so (RAYQUEUE_PREEMPTED=1), also
    # when it is submitted again after a crash, when preemptedBy is already cleared.
    after_preemption: bool = False
    log_tail: str | None = None
    # Recorded when a run starts; absent when the tasks folder is not in a git work tree.
    source: SourceRef | None = None
    conditions: list[Condition] = Field(default_factory=list)


class TaskStatusModel(DocumentModel):
    """A status sidecar as validated when read (TaskStatus.model_validate converts it)."""

    model_config = ConfigDict(extra="ignore")

    api_version: Literal["rayqueue/v1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["TaskStatus"] = "TaskStatus"
    metadata: Metadata
    status: TaskStatusBodyModel

    def to_document(self) -> dict[str, Any]:
        # Defaults (empty conditions, zero counters) are left out to keep sidecars short.
        doc = self.model_dump(by_alias=True, exclude_defaults=True, mode="json")
        return {"apiVersion": API_VERSION, "kind": "TaskStatus", **doc}


# One empty list for every status without conditions: nothing changes a status's list in place
# (a new list is built and the status copied).
_NO_CONDITIONS: list[Condition] = []


class TaskStatusBody(NamedTuple):
    """A task's status inside the loop: a plain record, a fraction of a pydantic model's size
    and cost to build or copy; the planner builds and copies tens of thousands per start.
    Same fields and defaults as TaskStatusBodyModel, which validates it when read
    (model_validate); to_document writes what that model writes. A new field goes into both,
    in the same place (tests/unit/specs/task/test_status_records_match_models.py checks)."""

    phase: Phase
    reason: str | None = None
    message: str | None = None
    queue: str | None = None
    queue_position: int | None = None
    queue_position_bucket: str | None = None
    estimated_start_at: datetime | None = None
    uid: str | None = None
    run: int = 0
    submission_id: str | None = None
    spec_hash: str | None = None
    ray_status: str | None = None
    queued_at: datetime | None = None
    scale_up_requested_at: datetime | None = None
    submitted_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    missing_since: datetime | None = None
    lost_restarts: int = 0
    retries: int = 0
    next_retry_at: datetime | None = None
    exit_code: int | None = None
    preemptions: int = 0
    preempted_by: str | None = None
    after_preemption: bool = False
    log_tail: str | None = None
    source: SourceRef | None = None
    conditions: list[Condition] = _NO_CONDITIONS

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> TaskStatusBody:
        """The pydantic name kept for the core's readers: a copy with some fields changed."""
        return self._replace(**update) if update else self

    @classmethod
    def model_validate(cls, data: Any) -> TaskStatusBody:
        """Validated as a file's body is (pydantic's ValidationError if it is not one)."""
        return cls.from_model(TaskStatusBodyModel.model_validate(data))

    @classmethod
    def from_model(cls, model: TaskStatusBodyModel) -> TaskStatusBody:
        values = _BODY_VALUES(model)
        if not model.conditions:  # share the one empty list
            values = (*values[:-1], _NO_CONDITIONS)
        return cls._make(values)

    def model_dump(
        self, *, by_alias: bool = False, exclude_defaults: bool = False, mode: str = "python"
    ) -> dict[str, Any]:
        """What TaskStatusBodyModel.model_dump gives with the same arguments."""
        json_mode = mode == "json"
        out: dict[str, Any] = {}
        for (name, alias, default, to_json), value in zip(_BODY_DUMP, self, strict=True):
            if exclude_defaults and value == default:
                continue
            if value is not None and to_json is not None:
                if to_json is _nested:
                    value = _nested(value, by_alias, exclude_defaults, mode)
                elif (
                    to_json is format_timestamp
                ):  # Timestamp's serializer, which pydantic applies always
                    value = format_timestamp(value)
                elif json_mode and type(value) is not str:
                    value = str(value)  # a Reason or a Phase: its value
            out[alias if by_alias else name] = value
        return out


def _nested(
    value: BaseModel | list[Condition], by_alias: bool, exclude_defaults: bool, mode: str
) -> object:
    if isinstance(value, list):
        return [
            c.model_dump(by_alias=by_alias, exclude_defaults=exclude_defaults, mode=mode)
            for c in value
        ]
    return value.model_dump(by_alias=by_alias, exclude_defaults=exclude_defaults, mode=mode)


def _dumper(name: str) -> Any:
    """How a field's value is dumped: nested models, timestamps, text (None: as it is)."""
    annotation = str(TaskStatusBodyModel.model_fields[name].annotation)
    if name in ("source", "conditions"):
        return _nested
    if "datetime" in annotation:
        return format_timestamp
    if "str" in annotation or name == "phase":
        return str
    return None


def _default(name: str) -> object:
    field = TaskStatusBodyModel.model_fields[name]
    return [] if name == "conditions" else field.default


# Per field, in order: its name, its alias in files, its default, and how it is dumped.
_BODY_DUMP: Final = tuple(
    (name, to_camel(name), _default(name), _dumper(name)) for name in TaskStatusBody._fields
)
_BODY_VALUES: Final = operator.attrgetter(*TaskStatusBody._fields)


def _metadata_document(metadata: Metadata | NameMetadata) -> dict[str, Any]:
    if metadata.labels or metadata.annotations:
        return metadata.model_dump(by_alias=True, exclude_defaults=True, mode="json")
    return {} if metadata.name is None else {"name": metadata.name}


class TaskStatus(NamedTuple):
    """A status sidecar inside the loop (see TaskStatusBody); TaskStatusModel reads files."""

    metadata: Metadata | NameMetadata  # NameMetadata when it is the name alone
    status: TaskStatusBody

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> TaskStatus:
        return self._replace(**update) if update else self

    @classmethod
    def model_validate(cls, data: Any) -> TaskStatus:
        return cls.from_model(TaskStatusModel.model_validate(data))

    @classmethod
    def from_model(cls, model: TaskStatusModel) -> TaskStatus:
        metadata = name_metadata(model.metadata)
        return cls(metadata=metadata, status=TaskStatusBody.from_model(model.status))

    def to_document(self) -> dict[str, Any]:
        """The document TaskStatusModel.to_document writes: defaults left out."""
        return {
            "apiVersion": API_VERSION,
            "kind": "TaskStatus",
            "metadata": _metadata_document(self.metadata),
            "status": self.status.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
        }
