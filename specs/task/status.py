"""A task's status: the one record of it (TaskStatus, with its TaskStatusBody), which the
store, the loop, the planner and the views all hold; and the sidecar's schema, the pydantic
models (TaskStatusModel, TaskStatusBodyModel) that only the file boundary uses: the reader
(specs.yamlio.parse) validates a sidecar with them, and the writer (specs.yamlio.dump) takes
their field order. The records have the same fields and defaults; `to_document` writes what
those models write."""

from __future__ import annotations

import operator
import typing
from collections.abc import Mapping
from datetime import datetime
from types import NoneType, UnionType
from typing import Any, Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from specs.cluster import cut_text
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
    # Since when Ray has said the running run holds beyond its declaration by the margin
    # (reconciler/core/task/overuse.py): the Overusing condition and `overuse: Stop` count
    # from it; cleared when the run holds within its declaration or ends.
    over_since: Timestamp | None = None
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
    over_since: datetime | None = None
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
        return bounded_body(cls._make(values))  # a file may hold anything: read within the caps

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
        return bounded(cls(metadata=metadata, status=TaskStatusBody.from_model(model.status)))

    def to_document(self) -> dict[str, Any]:
        """The document TaskStatusModel.to_document writes: defaults left out."""
        return {
            "apiVersion": API_VERSION,
            "kind": "TaskStatus",
            "metadata": _metadata_document(self.metadata),
            "status": self.status.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
        }


# --- the caps: what one status may hold --------------------------------------------------------
# A status is written by the loop from what a team's folder and jobs give it (names, messages,
# a failed run's log), so each field has a size in bytes it never exceeds, whatever the input:
# `bounded` is applied to every status the store writes or reads, so no field escapes it.
# README.md ("The status sidecar") lists them.

TEXT_BYTES: Final = 4 * 1024  # a message: the status's and each condition's
LOG_TAIL_BYTES: Final = 16 * 1024  # the end of a failed run's log
LOG_LINE_BYTES: Final = 2 * 1024  # one line of that tail
WORD_BYTES: Final = 1024  # every other text: a reason, a queue, a name, an id, a label
MAX_ITEMS: Final = 8  # the entries of a list or a mapping (conditions, labels)
_FIELD_BYTES: Final = {"message": TEXT_BYTES, "log_tail": LOG_TAIL_BYTES}
_KEEP_END: Final = frozenset({"log_tail"})  # the end of a log says why the run failed
# Values that hold no text: never cut.
_PLAIN: Final = frozenset({int, bool, float, datetime, Phase, NoneType})


def _types(annotation: Any) -> set[Any]:
    """The types a field's annotation allows, unions and Annotated unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _types(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is UnionType:
        return {t for arg in typing.get_args(annotation) for t in _types(arg)}
    return {origin or annotation}


# The body's fields that may hold text (by their declared types, so a new text field is checked
# without being named here), each with its cap.
_CHECKED: Final = tuple(
    (index, name, _FIELD_BYTES.get(name, WORD_BYTES), name in _KEEP_END)
    for index, name in enumerate(TaskStatusBody._fields)
    if not _types(TaskStatusBodyModel.model_fields[name].annotation) <= _PLAIN
)


_TEXTS: Final = frozenset(
    name
    for name in TaskStatusBody._fields
    if _types(TaskStatusBodyModel.model_fields[name].annotation) <= {str, NoneType}
)


def _values_at(indices: list[int]) -> Any:
    """A getter of a body's values at `indices`, always as a tuple (itemgetter gives one index's
    value bare)."""
    if len(indices) == 1:
        return lambda body: (body[indices[0]],)
    return operator.itemgetter(*indices)


_TEXT_VALUES: Final = _values_at([i for i, name, *_ in _CHECKED if name in _TEXTS])
_OTHER_VALUES: Final = _values_at([i for i, name, *_ in _CHECKED if name not in _TEXTS])


def _fits(value: object, limit: int) -> bool:
    if value is None or type(value) in _PLAIN:
        return True
    if isinstance(value, str):
        return len(value) * 4 <= limit or len(value.encode("utf-8", "surrogatepass")) <= limit
    if isinstance(value, list | tuple):
        return len(value) <= MAX_ITEMS and all(_fits(item, limit) for item in value)
    if isinstance(value, dict):
        return len(value) <= MAX_ITEMS and all(
            _fits(k, limit) and _fits(v, limit) for k, v in value.items()
        )
    if isinstance(value, BaseModel):  # a condition, a commit: each field by its own cap
        return all(
            _fits(getattr(value, name), _FIELD_BYTES.get(name, WORD_BYTES))
            for name in type(value).model_fields
        )
    return True


def _bound(value: Any, limit: int, keep_end: bool) -> Any:
    if _fits(value, limit):
        return value
    if isinstance(value, str):
        return cut_text(value, limit, keep_end=keep_end)
    if isinstance(value, list | tuple):
        return type(value)(_bound(item, limit, keep_end) for item in value[:MAX_ITEMS])
    if isinstance(value, dict):
        items = list(value.items())[:MAX_ITEMS]
        return {_bound(k, limit, keep_end): _bound(v, limit, keep_end) for k, v in items}
    if isinstance(value, BaseModel):
        caps = {name: _FIELD_BYTES.get(name, WORD_BYTES) for name in type(value).model_fields}
        update = {
            name: _bound(getattr(value, name), cap, name in _KEEP_END)
            for name, cap in caps.items()
            if not _fits(getattr(value, name), cap)
        }
        return value.model_copy(update=update)
    return value


def _at_a_glance(body: TaskStatusBody) -> bool:
    """Within every cap without a closer look, as nearly every status is: its text fields of
    at most WORD_BYTES bytes (four a character at most), and no conditions or commit."""
    texts = _TEXT_VALUES(body)
    return max(map(len, filter(None, texts)), default=0) * 4 <= WORD_BYTES and all(
        value is None or value is _NO_CONDITIONS for value in _OTHER_VALUES(body)
    )


def bounded_body(body: TaskStatusBody) -> TaskStatusBody:
    """`body` with every field within its cap: text cut (a log tail keeping its end), lists
    and mappings to MAX_ITEMS entries. The same object when it fits, as nearly all do; a
    bounded body is unchanged by bounding it again."""
    if _at_a_glance(body):
        return body
    update = {
        name: _bound(body[index], limit, keep_end)
        for index, name, limit, keep_end in _CHECKED
        if not _fits(body[index], limit)
    }
    return body._replace(**update) if update else body


def bounded(status: TaskStatus) -> TaskStatus:
    """`status` with its body bounded (bounded_body) and its labels and annotations too. The
    task's name is the file's and is not cut."""
    body = bounded_body(status.status)
    metadata = status.metadata
    if isinstance(metadata, Metadata) and not (
        _fits(metadata.labels, WORD_BYTES) and _fits(metadata.annotations, WORD_BYTES)
    ):
        metadata = metadata.model_copy(
            update={
                "labels": _bound(metadata.labels, WORD_BYTES, False),
                "annotations": _bound(metadata.annotations, WORD_BYTES, False),
            }
        )
    if body is status.status and metadata is status.metadata:
        return status
    return TaskStatus(metadata=metadata, status=body)
