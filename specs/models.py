"""The rayqueue/v1 resource types: the Task spec a user writes and the TaskStatus we write back."""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal, NamedTuple, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from specs import submission_ids
from specs.pipeline import MAX_DEPENDENCIES, DependencySpec, RetrySpec
from specs.quantity import QuantityError, format_memory, parse_memory

API_VERSION: Final = "rayqueue/v1"
RESTARTED_AT = "rayqueue/restartedAt"


def _iso(value: datetime) -> str:
    """RFC 3339 UTC with milliseconds: sortable, and fine enough to be a FIFO key."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


Timestamp = Annotated[datetime, PlainSerializer(_iso, return_type=str)]
MemoryBytes = Annotated[int, PlainSerializer(format_memory, return_type=str)]
# The rule is checked by TaskSpec._submission_id (messages that say why); the pattern only
# lets editors that read task.schema.json flag a bad id early.
SubmissionId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=submission_ids.MAX_LENGTH,
        json_schema_extra={"pattern": submission_ids.SCHEMA_PATTERN},
    ),
]
Finite = Annotated[float, Field(ge=0, allow_inf_nan=False, le=1e9)]


# The sets of field names that models were built with, one object per distinct set. Every
# model keeps such a set (pydantic's __pydantic_fields_set__: 200-700 bytes each, and a
# status or task is several models): at 50,000 tasks, their own copies took ~150 MB.
_FIELD_SETS: dict[frozenset[str], set[str]] = {}
_FIELD_SETS_KEPT = 4096  # distinct sets shared; past that (never, in practice) each keeps its own


def _shared_fields(fields: set[str]) -> set[str]:
    key = frozenset(fields)
    shared = _FIELD_SETS.get(key)
    if shared is None:
        if len(_FIELD_SETS) >= _FIELD_SETS_KEPT:
            return fields
        shared = _FIELD_SETS.setdefault(key, set(fields))
    return shared


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )

    # The models are frozen, so nothing changes a model's field set in place: pydantic's
    # model_copy updates a copy of it. So equal sets may be one object (see _FIELD_SETS).
    def model_post_init(self, context: Any, /) -> None:
        object.__setattr__(
            self, "__pydantic_fields_set__", _shared_fields(self.__pydantic_fields_set__)
        )

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copied = super().model_copy(update=update, deep=deep)
        object.__setattr__(
            copied, "__pydantic_fields_set__", _shared_fields(copied.__pydantic_fields_set__)
        )
        return copied


class Bundle(_Model):
    """Resources that must fit on one node: one piece of a task's shape for the autoscaler."""

    cpu: Finite = 0.0
    gpu: Finite = 0.0
    memory: MemoryBytes = Field(default=0, description="bytes; YAML takes 4Gi, 512Mi, 2G or GiB")

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: object) -> int:
        try:
            return parse_memory(value)
        except OverflowError:
            # parse_memory lets float() overflow on absurd numbers (10**400, "9" * 400);
            # pydantic only turns ValueError into a validation error, so convert it here.
            raise QuantityError("is larger than any cluster could hold") from None

    def is_empty(self) -> bool:
        return self.cpu == 0 and self.gpu == 0 and self.memory == 0


MAX_BUNDLES = 256


class Resources(Bundle):
    """What a task declares it will use while it runs. A reservation, not a Ray limit.
    `bundles`: on an autoscaling cluster, how it is spread over nodes (each bundle on one
    node); together they must hold at least the resources above. Not given: rayqueue cuts the
    request to the node types itself."""

    bundles: list[Bundle] = Field(default_factory=list, max_length=MAX_BUNDLES)

    @model_validator(mode="after")
    def _bundles_cover(self) -> Resources:
        if not self.bundles:
            return self
        short = [
            f"{name} {total:g} < {asked:g}"
            for name, asked, total in (
                ("cpu", self.cpu, sum(b.cpu for b in self.bundles)),
                ("gpu", self.gpu, sum(b.gpu for b in self.bundles)),
                ("memory", self.memory, sum(b.memory for b in self.bundles)),
            )
            if total < asked - 1e-9
        ]
        if short:
            raise ValueError(
                "bundles must together hold at least the task's resources: " + ", ".join(short)
            )
        return self


# The fields whose values spec_hash's dump of the resources depends on (bundles only shape
# the autoscaler's request).
_RESOURCE_FIELDS: tuple[str, ...] = tuple(n for n in Resources.model_fields if n != "bundles")


class Metadata(_Model):
    name: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


# The metadata of a spec that has none: one object for all of them (the models are frozen, and
# nothing changes a model's dicts in place), not one Metadata built per spec on a cold start.
_NO_METADATA = Metadata()


# The default of the most elements an array may expand to (issue 28; the setting
# max_array_elements, RAYQUEUE_MAX_ARRAY_ELEMENTS). One array's status sidecar stays under 1 MB
# at this size. The parser checks it (specs/parse.py), since the limit is a setting.
MAX_ARRAY_ELEMENTS: Final = 10_000
ARRAY_LIMIT_VAR: Final = "RAYQUEUE_MAX_ARRAY_ELEMENTS"
ARRAY_SIZE_VAR: Final = "RAYQUEUE_ARRAY_SIZE"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ArrayValue = str | int | float | bool


def _env_keys(keys: Iterable[str], what: str) -> None:
    for key in keys:
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(f"{what} key {key!r} is not a valid environment variable name")
        if key.startswith("RAYQUEUE_"):
            raise ValueError(f"{what} key {key!r}: names starting with RAYQUEUE_ are reserved")


class ArraySpec(_Model):
    """One task run many times: the product of `matrix`, `count` runs, or a list of `values`.
    Each element gets its values as environment variables, plus RAYQUEUE_ARRAY_INDEX and
    RAYQUEUE_ARRAY_SIZE."""

    matrix: dict[str, list[ArrayValue]] | None = None
    count: int | None = Field(default=None, ge=1)
    values: list[dict[str, ArrayValue]] | None = None
    max_parallel: int | None = Field(default=None, ge=1)

    @field_validator("matrix")
    @classmethod
    def _matrix(
        cls, value: dict[str, list[ArrayValue]] | None
    ) -> dict[str, list[ArrayValue]] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("matrix must not be empty")
        _env_keys(value, "matrix")
        for key, items in value.items():
            if not items:
                raise ValueError(f"matrix {key} has no values")
        return value

    @field_validator("values")
    @classmethod
    def _values(
        cls, value: list[dict[str, ArrayValue]] | None
    ) -> list[dict[str, ArrayValue]] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("values must not be empty")
        for item in value:
            _env_keys(item, "values")
        return value

    @model_validator(mode="after")
    def _one_form(self) -> ArraySpec:
        given = [n for n in ("matrix", "count", "values") if getattr(self, n) is not None]
        if len(given) != 1:
            shown = " and ".join(given) if given else "none"
            raise ValueError(f"give exactly one of matrix, count and values (got {shown})")
        return self

    @property
    def size(self) -> int:
        if self.count is not None:
            return self.count
        if self.values is not None:
            return len(self.values)
        return math.prod(len(v) for v in (self.matrix or {}).values())


class TaskSpec(_Model):
    entrypoint: str = Field(min_length=1)
    runtime_env: dict[str, Any] | None = None
    priority: int = Field(default=0, ge=0, le=9)
    resources: Resources = Field(default_factory=Resources)
    timeout_seconds: float = Field(default=0, ge=0, allow_inf_nan=False, le=1e9)
    suspend: bool = False
    submission_id: SubmissionId | None = None
    # Deprecated: a Lost-only retry policy (reconciler.core.retries.lost_only), 1 when not given;
    # use `retry`. None tells "not given" apart, since the two may not be combined.
    max_lost_restarts: int | None = Field(default=None, ge=0, le=100)
    retry: RetrySpec | None = None
    depends_on: list[DependencySpec] = Field(default_factory=list, max_length=MAX_DEPENDENCIES)
    preemptible: bool = True  # false: never a preemption victim
    # true: the task saves its state on SIGTERM (within the grace period) and resumes on its
    # next run (RAYQUEUE_PREEMPTED=1): the cheapest victim, it loses only the grace period.
    resumable: bool = False
    array: ArraySpec | None = None  # run as many elements (specs/arrays.py)

    @field_validator("entrypoint")
    @classmethod
    def _entrypoint(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("entrypoint must not be blank")
        return value

    @field_validator("submission_id")
    @classmethod
    def _submission_id(cls, value: str | None) -> str | None:
        # A name, never a path: Ray puts it into URLs (see specs.submission_ids).
        why = submission_ids.problem(value) if value is not None else None
        if why is not None:
            raise ValueError(f"{value!r} {why}")
        return value

    @model_validator(mode="after")
    def _some_resource(self) -> TaskSpec:
        # The old service's rule, kept word for word.
        if self.resources.is_empty():
            raise ValueError("task must request at least one resource")
        return self

    @field_validator("retry")
    @classmethod
    def _one_retry_policy(cls, value: RetrySpec | None, info: ValidationInfo) -> RetrySpec | None:
        if value is not None and info.data.get("max_lost_restarts") is not None:
            raise ValueError(
                "cannot be combined with the deprecated maxLostRestarts; "
                "put Lost into retry.on instead"
            )
        return value

    @field_validator("array")
    @classmethod
    def _array_ids(cls, value: ArraySpec | None, info: ValidationInfo) -> ArraySpec | None:
        if value is not None and info.data.get("submission_id") is not None:
            raise ValueError("cannot be combined with submissionId: each element has its own id")
        return value

    @field_validator("depends_on")
    @classmethod
    def _distinct_dependencies(cls, value: list[DependencySpec]) -> list[DependencySpec]:
        names = [d.name for d in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"dependsOn names {', '.join(twice)} more than once")
        return value


# spec_hash's text. Sidecars record the hash, so it must stay byte for byte what it was
# (tests/unit/test_spec_hash.py): the JSON of the dict of the four fields with sorted keys,
# made here from the JSON of each (one encoder made once), and the resources' part (pydantic's
# dump: memory is written as text) kept per distinct value, as a cold start hashes every spec
# and most share a few shapes.
_HASH_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
_RESOURCES_JSON: dict[tuple[str, ...], str] = {}
_RESOURCES_KEPT = 1024


def _resources_json(resources: Resources) -> str:
    """The JSON of resources.model_dump(by_alias=True, exclude={"bundles"})."""
    # By repr, not value: 1 == 1.0 and -0.0 == 0.0, but their dumps differ.
    key = tuple(repr(getattr(resources, field)) for field in _RESOURCE_FIELDS)
    text = _RESOURCES_JSON.get(key)
    if text is None:
        text = _HASH_JSON.encode(resources.model_dump(by_alias=True, exclude={"bundles"}))
        if len(_RESOURCES_JSON) < _RESOURCES_KEPT:
            _RESOURCES_JSON[key] = text
    return text


class Task(_Model):
    api_version: Literal["rayqueue/v1"] = Field(alias="apiVersion")
    kind: Literal["Task"]
    metadata: Metadata = Field(default_factory=lambda: _NO_METADATA)
    spec: TaskSpec

    def spec_hash(self) -> str:
        """Hash of the run-defining fields; a change to any of them means a new run."""
        runtime_env = self.spec.runtime_env
        if self.spec.array is not None and runtime_env is not None:
            # An array element's size changes when elements are added or removed; that alone
            # must not re-run the elements that stay (specs/arrays.py sets it).
            env = {k: v for k, v in (runtime_env.get("env_vars") or {}).items()}
            env.pop(ARRAY_SIZE_VAR, None)
            runtime_env = {**runtime_env, "env_vars": env}

        def encode(value: object) -> str:
            return "null" if value is None else _HASH_JSON.encode(value)

        # {"entrypoint", "resources", "restartedAt", "runtimeEnv"}, keys in sorted order; the
        # resources without bundles, which only shape the autoscaler's request (no new run)
        blob = (
            f'{{"entrypoint":{encode(self.spec.entrypoint)},'
            f'"resources":{_resources_json(self.spec.resources)},'
            f'"restartedAt":{encode(self.metadata.annotations.get(RESTARTED_AT))},'
            f'"runtimeEnv":{encode(runtime_env)}}}'
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_document(self) -> dict[str, Any]:
        """The plain dict to write as YAML, without defaults the user did not set."""
        return self.model_dump(by_alias=True, exclude_defaults=True, mode="json") | {
            "apiVersion": API_VERSION,
            "kind": "Task",
        }


class Phase(StrEnum):
    QUEUED = "Queued"
    STARTING = "Starting"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    TIMED_OUT = "TimedOut"
    STOPPED = "Stopped"
    SUSPENDED = "Suspended"
    INVALID = "Invalid"
    UNSCHEDULABLE = "Unschedulable"
    LOST = "Lost"

    @property
    def active(self) -> bool:
        """A run is in Ray and holds its declared resources."""
        return self in (Phase.STARTING, Phase.RUNNING)

    @property
    def finished(self) -> bool:
        return self in FINISHED


FINISHED = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.TIMED_OUT, Phase.STOPPED, Phase.LOST})


class Reason(StrEnum):
    """Why a task is in its phase, in CamelCase. Status files keep `reason` a plain string, so a
    file written by a newer version still loads; code compares against these members only."""

    # the life of a run
    QUEUED = "Queued"
    ADOPTED = "Adopted"
    SUBMITTED = "Submitted"
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    JOB_FAILED = "JobFailed"
    STOPPED_IN_RAY = "StoppedInRay"
    TIMEOUT_EXCEEDED = "TimeoutExceeded"
    START_TIMEOUT = "StartTimeout"
    SUBMIT_FAILED = "SubmitFailed"
    SUBMISSION_ID_CONFLICT = "SubmissionIdConflict"
    JOB_MISSING = "JobMissing"
    JOB_MISSING_AFTER_OUTAGE = "JobMissingAfterOutage"
    JOB_LOST = "JobLost"
    REQUEUED = "Requeued"
    # retries (spec.retry)
    RETRY_BACKOFF = "RetryBackoff"
    BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
    NON_RETRYABLE_EXIT_CODE = "NonRetryableExitCode"
    # dependencies (spec.dependsOn)
    WAITING_FOR_DEPENDENCY = "WaitingForDependency"
    DEPENDENCY_FAILED = "DependencyFailed"
    DEPENDENCY_MISSING = "DependencyMissing"
    DEPENDENCY_CYCLE = "DependencyCycle"
    DEPENDENCIES_MET = "DependenciesMet"  # the dependency gate's verdict; never a status reason
    # preemption: the victim's phase reason, and the preemptor's while its victims stop
    PREEMPTED = "Preempted"
    PREEMPTING = "Preempting"
    # what the spec asks for
    SPEC_CHANGED = "SpecChanged"
    RESUMED = "Resumed"
    SUSPENDED = "Suspended"
    INVALID_SPEC = "InvalidSpec"
    EXCEEDS_CLUSTER = "ExceedsCluster"
    # why a queued task waits (the admission policies)
    WAITING_FOR_RESOURCES = "WaitingForResources"
    INFLIGHT_LIMIT = "InflightLimit"
    WAITING_BEHIND_HIGHER_PRIORITY = "WaitingBehindHigherPriority"
    WAITING_BEHIND_RESERVATION = "WaitingBehindReservation"
    QUOTA_EXCEEDED = "QuotaExceeded"  # its team queue's quota, not the cluster, holds it back
    # autoscaling (issue 26): it waits for nodes the autoscaler was asked for, or gave up on them
    WAITING_FOR_SCALE_UP = "WaitingForScaleUp"
    SCALE_UP_TIMEOUT = "ScaleUpTimeout"
    MAX_RUNNING = "MaxRunning"  # its team queue runs as many tasks as its maxRunning allows
    QUEUE_FULL = "QueueFull"  # its team queue holds maxQueued tasks: this one does not count
    ARRAY_AT_MAX_PARALLEL = "ArrayAtMaxParallel"  # its array's maxParallel elements are active
    NOT_CONSIDERED = "NotConsidered"  # past the candidates admission tests in a pass
    # conditions (a SpecInvalid condition's reason is its type, ConditionType.SPEC_INVALID)
    RAY_UNREACHABLE = "RayUnreachable"
    # why a run was preempted (the Preempted condition's reason)
    WITHIN_QUEUE = "WithinQueue"
    RECLAIM = "Reclaim"  # lent quota taken back by a queue below its nominal quota
    # pure sharing: a queue of lower weighted share stopped a run of a queue of higher share
    # (fairSharing.preemptionStrategies), as Kueue's InCohortFairSharing
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    # a task the loop has not looked at yet (API and CLI views)
    NOT_YET_RECONCILED = "NotYetReconciled"
    # deletions the loop refuses to carry out (log events, never a task's status)
    FOLDER_EMPTY = "FolderEmpty"
    TOO_MANY_DELETIONS = "TooManyDeletions"
    # a transition the state machine refuses: a bug, logged; the task keeps its status
    ILLEGAL_TRANSITION = "IllegalTransition"
    # _queues.yaml is invalid and none was ever valid: every task is in one default queue
    QUEUE_CONFIG_INVALID = "QueueConfigInvalid"


def read_reason(text: str | None) -> Reason | None:
    """A reason as a status file spells it; None if absent or unknown to this version."""
    try:
        return Reason(text) if text is not None else None
    except ValueError:
        return None


class ConditionType(StrEnum):
    """The conditions a task's status may list, in the order it lists them. Status files keep
    `type` a plain string."""

    SPEC_INVALID = "SpecInvalid"
    CLUSTER_UNAVAILABLE = "ClusterUnavailable"
    PREEMPTED = "Preempted"
    QUEUE_CONFIG_INVALID = "QueueConfigInvalid"


class Condition(_Model):
    """An abnormal state a task is in, Kubernetes style; listed only while it holds."""

    type: str
    status: Literal["True", "False", "Unknown"] = "True"
    reason: str
    message: str = ""
    last_transition_time: Timestamp


class SourceRef(_Model):
    """The commit a run's spec came from (GitOps), as Flux writes revisions."""

    revision: str  # main@sha1:<40 hex>, or sha1:<40 hex> on a detached HEAD
    dirty: bool = False  # the file differed from that commit when the run started


class TaskStatusBodyModel(_Model):
    """A status body as read from and written to a sidecar (validation at the file boundary).
    Inside the loop a status is the lean TaskStatusBody below, with the same fields."""

    model_config = ConfigDict(extra="ignore")  # old sidecars with extra fields still load

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
    # When Ray stopped listing the running job; cleared by every other transition. Older files
    # kept this time in finishedAt (with reason JobMissing): see lifecycle.missing_since.
    missing_since: Timestamp | None = None
    lost_restarts: int = 0  # old sidecars only: the retries of maxLostRestarts before `retries`
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


class TaskStatusModel(_Model):
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
# (a new list is built and the status copied), as with the frozen models before.
_NO_CONDITIONS: list[Condition] = []


class TaskStatusBody(NamedTuple):
    """A task's status inside the loop: a plain record (~0.3 KB, built in a few µs), not a
    pydantic model (~1 KB with its field set, ~10 µs to build or copy); the planner builds
    and copies tens of thousands per start. Same fields and defaults as TaskStatusBodyModel,
    which validates it when read (model_validate); to_document writes what that model wrote.
    A new field goes into both, in the same place (tests/unit/test_lean_status.py checks)."""

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
                elif to_json is _iso:  # Timestamp's serializer, which pydantic applies always
                    value = _iso(value)
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
        return _iso
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


def _metadata_document(metadata: Metadata) -> dict[str, Any]:
    if metadata.labels or metadata.annotations:
        return metadata.model_dump(by_alias=True, exclude_defaults=True, mode="json")
    return {} if metadata.name is None else {"name": metadata.name}


class TaskStatus(NamedTuple):
    """A status sidecar inside the loop (see TaskStatusBody); TaskStatusModel reads files."""

    metadata: Metadata
    status: TaskStatusBody

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> TaskStatus:
        return self._replace(**update) if update else self

    @classmethod
    def model_validate(cls, data: Any) -> TaskStatus:
        return cls.from_model(TaskStatusModel.model_validate(data))

    @classmethod
    def from_model(cls, model: TaskStatusModel) -> TaskStatus:
        return cls(metadata=model.metadata, status=TaskStatusBody.from_model(model.status))

    def to_document(self) -> dict[str, Any]:
        """The document TaskStatusModel.to_document wrote: defaults left out."""
        return {
            "apiVersion": API_VERSION,
            "kind": "TaskStatus",
            "metadata": _metadata_document(self.metadata),
            "status": self.status.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
        }
