"""The rayqueue/v1 resource types: the Task spec a user writes and the TaskStatus we write back."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal, Protocol, Self

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

from specs.cluster import Capacity
from specs.task import submission_ids
from specs.task.pipeline import MAX_DEPENDENCIES, DependencySpec, RetrySpec
from specs.task.quantity import QuantityError, format_memory, parse_memory

API_VERSION: Final = "rayqueue/v1"
RESTARTED_AT = "rayqueue/restartedAt"


def format_timestamp(value: datetime) -> str:
    """A Timestamp as files hold it: RFC 3339 UTC with milliseconds, sortable, and fine enough
    to be a FIFO key."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


Timestamp = Annotated[datetime, PlainSerializer(format_timestamp, return_type=str)]
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
# model keeps such a set (pydantic's __pydantic_fields_set__), a status or a task is several
# models, and a folder's models are built with few distinct sets: sharing them saves memory.
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


class DocumentModel(BaseModel):
    """The base of every model of a rayqueue/v1 document and its parts: camelCase in files,
    snake_case in code, unknown fields refused, frozen, field sets shared."""

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


class Bundle(DocumentModel):
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


# The smallest request of each resource that counts: less reserves nothing anyone could use
# (Ray itself rounds CPU and GPU to 1/10000), yet would pass "at least one resource" and take
# a place in the queue for free. A request of 0 is no request and stays allowed.
MIN_CPU: Final = 0.01
MIN_GPU: Final = 0.01
MIN_MEMORY: Final = 1 << 20


def below_minimum(cpu: float, gpu: float, memory: int) -> str | None:
    """Why a request of these amounts is too small to count (naming the first such one and
    its minimum), or None."""
    if 0 < cpu < MIN_CPU:
        return f"cpu {cpu:g} is below the smallest request, {MIN_CPU:g} (0 means none)"
    if 0 < gpu < MIN_GPU:
        return f"gpu {gpu:g} is below the smallest request, {MIN_GPU:g} (0 means none)"
    if 0 < memory < MIN_MEMORY:
        return (
            f"memory {memory} bytes is below the smallest request, "
            f"{format_memory(MIN_MEMORY)} (0 means none)"
        )
    return None


class Resources(Bundle):
    """What a task declares it will use while it runs. A reservation, not a Ray limit.
    `bundles`: on an autoscaling cluster, how it is spread over nodes (each bundle on one
    node); together they must hold at least the resources above. Not given: rayqueue cuts the
    request to the node types itself."""

    bundles: list[Bundle] = Field(default_factory=list, max_length=MAX_BUNDLES)

    @model_validator(mode="after")
    def _large_enough(self) -> Resources:
        why = below_minimum(self.cpu, self.gpu, self.memory)
        if why is not None:
            raise ValueError(why)
        return self

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

# Resources without bundles, one object per distinct value: most specs of a folder share a few
# shapes, and a model with its dict, its empty bundles list and its numbers is not small. Keyed
# by each value's repr (-0.0 == 0.0, but their dumps differ) and by the field set
# (exclude_unset tells `gpu: 0` from no gpu); bounded, past that each keeps its own.
_SHARED_RESOURCES: dict[tuple[object, ...], Resources] = {}
_SHARED_RESOURCES_KEPT = 4096
# spec_hash's JSON of each shared Resources, by its id: shared ones are kept for good, so an id
# here is never another object's.
_SHARED_JSON: dict[int, str] = {}


def _resources_key(fields: frozenset[str], values: Iterable[object]) -> tuple[object, ...]:
    return (fields, *(repr(value) for value in values))


def shared_resources(value: Resources) -> Resources:
    """The one object kept for resources equal to `value` (the first such value seen becomes
    it); `value` itself when it has bundles, or when the bounded table is full."""
    if value.bundles or type(value) is not Resources:
        return value
    key = _resources_key(
        frozenset(value.__pydantic_fields_set__),
        (getattr(value, field) for field in _RESOURCE_FIELDS),
    )
    shared = _SHARED_RESOURCES.get(key)
    if shared is None:
        if len(_SHARED_RESOURCES) >= _SHARED_RESOURCES_KEPT:
            return value
        shared = _SHARED_RESOURCES.setdefault(key, value)
        _SHARED_JSON[id(shared)] = _resources_json(shared)
    return shared


def known_resources(
    fields: frozenset[str], cpu: float, gpu: float, memory: int
) -> Resources | None:
    """The shared Resources with these values, given as the fields named in `fields` (the
    others left to their defaults), if shared_resources has kept one; else None."""
    return _SHARED_RESOURCES.get(_resources_key(fields, (cpu, gpu, memory)))


# The Capacity each shared Resources asks for, by its id (shared ones are kept for good, so an id
# here is never another object's): the planner keeps a task's request
# (reconciler/core/task/jobs.py, request_of), one object per shape rather than one per task.
_SHARED_REQUESTS: dict[int, Capacity] = {}


def request_capacity(resources: Resources) -> Capacity:
    """What `resources` asks of the cluster, as Ray counts it; one object per shared value."""
    request = _SHARED_REQUESTS.get(id(resources))
    if request is None:
        request = Capacity(resources.cpu, resources.gpu, float(resources.memory))
        if id(resources) in _SHARED_JSON:
            _SHARED_REQUESTS[id(resources)] = request
    return request


# One empty dict for every Metadata without labels or annotations (two per task, a spec's and
# its status's): the models are frozen and nothing changes their dicts in place.
NO_TEXTS: dict[str, str] = {}


class Metadata(DocumentModel):
    name: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        if not self.labels:
            object.__setattr__(self, "labels", NO_TEXTS)
        if not self.annotations:
            object.__setattr__(self, "annotations", NO_TEXTS)


# The metadata of a spec that has none: one object for all of them (the models are frozen, and
# nothing changes a model's dicts in place), not one Metadata built per spec on a cold start.
NO_METADATA = Metadata()


# The default of the most elements an array may expand to (the setting max_array_elements,
# RAYQUEUE_MAX_ARRAY_ELEMENTS), small enough that one array's status sidecar stays under 1 MB.
# The parser checks it (specs/yamlio/parse.py): the limit is a setting.
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


class ArraySpec(DocumentModel):
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


# One empty list for every spec without dependencies (the models are frozen, and nothing
# changes their lists in place), given as `dependsOn: []` or left out.
NO_DEPENDENCIES: list[DependencySpec] = []


# A spec as validated at the file boundary; inside the loop it is the lean TaskSpec
# (specs/task/records.py).
# (Comments, not docstrings: a docstring would be the schema's description.)
class TaskSpecModel(DocumentModel):
    model_config = ConfigDict(title="TaskSpec")

    entrypoint: str = Field(min_length=1)
    runtime_env: dict[str, Any] | None = None
    priority: int = Field(default=0, ge=0, le=9)
    resources: Resources = Field(default_factory=Resources)
    timeout_seconds: float = Field(default=0, ge=0, allow_inf_nan=False, le=1e9)
    suspend: bool = False
    submission_id: SubmissionId | None = None
    # Deprecated: a Lost-only retry policy (reconciler.core.task.retries.lost_only), 1 when not
    # given; use `retry`. None tells "not given" apart, since the two may not be combined.
    max_lost_restarts: int | None = Field(default=None, ge=0, le=100)
    retry: RetrySpec | None = None
    depends_on: list[DependencySpec] = Field(
        default_factory=lambda: NO_DEPENDENCIES, max_length=MAX_DEPENDENCIES
    )
    preemptible: bool = True  # false: never a preemption victim
    # true: the task saves its state on SIGTERM (within the grace period) and resumes on its
    # next run (RAYQUEUE_PREEMPTED=1): the cheapest victim, it loses only the grace period.
    resumable: bool = False
    array: ArraySpec | None = None  # run as many elements (specs/task/arrays.py)

    @field_validator("entrypoint")
    @classmethod
    def _entrypoint(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("entrypoint must not be blank")
        return value

    @field_validator("submission_id")
    @classmethod
    def _submission_id(cls, value: str | None) -> str | None:
        # A name, never a path: Ray puts it into URLs (see specs.task.submission_ids).
        why = submission_ids.problem(value) if value is not None else None
        if why is not None:
            raise ValueError(f"{value!r} {why}")
        return value

    @field_validator("resources")
    @classmethod
    def _share_resources(cls, value: Resources) -> Resources:
        return shared_resources(value)

    @model_validator(mode="after")
    def _some_resource(self) -> TaskSpecModel:
        # Worded as the legacy API words it: clients may match on the message.
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
        if not value:
            return NO_DEPENDENCIES  # one empty list for every spec without dependencies
        names = [d.name for d in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"dependsOn names {', '.join(twice)} more than once")
        return value


# spec_hash's text. Sidecars record the hash, so it must not change, byte for byte
# (tests/unit/specs/task/test_spec_hash.py): the JSON of the dict of the four fields with sorted
# keys, made here from the JSON of each (one encoder made once), and the resources' part
# (pydantic's dump: memory is written as text) kept per distinct value, as a cold start hashes
# every spec and most share a few shapes.
_HASH_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
_RESOURCES_JSON: dict[tuple[str, ...], str] = {}
_RESOURCES_KEPT = 1024


def _resources_json(resources: Resources) -> str:
    """The JSON of resources.model_dump(by_alias=True, exclude={"bundles"})."""
    shared = _SHARED_JSON.get(id(resources))
    if shared is not None:
        return shared
    # By repr, not value: 1 == 1.0 and -0.0 == 0.0, but their dumps differ.
    key = tuple(repr(getattr(resources, field)) for field in _RESOURCE_FIELDS)
    text = _RESOURCES_JSON.get(key)
    if text is None:
        text = _HASH_JSON.encode(resources.model_dump(by_alias=True, exclude={"bundles"}))
        if len(_RESOURCES_JSON) < _RESOURCES_KEPT:
            _RESOURCES_JSON[key] = text
    return text


# A task as validated at the file boundary; inside the loop it is the lean Task
# (specs/task/records.py).
class TaskModel(DocumentModel):
    model_config = ConfigDict(title="Task")

    api_version: Literal["rayqueue/v1"] = Field(alias="apiVersion")
    kind: Literal["Task"]
    metadata: Metadata = Field(default_factory=lambda: NO_METADATA)
    spec: TaskSpecModel

    def spec_hash(self) -> str:
        """Hash of the run-defining fields; a change to any of them means a new run."""
        return spec_hash_of(self.metadata, self.spec)

    def to_document(self) -> dict[str, Any]:
        """The plain dict to write as YAML, without defaults the user did not set."""
        return self.model_dump(by_alias=True, exclude_defaults=True, mode="json") | {
            "apiVersion": API_VERSION,
            "kind": "Task",
        }


class RunDefining(Protocol):
    """The fields of a spec that define its run, as spec_hash_of reads them: TaskSpecModel and
    the lean TaskSpec (specs/task/records.py) both have them."""

    @property
    def entrypoint(self) -> str: ...
    @property
    def runtime_env(self) -> dict[str, Any] | None: ...
    @property
    def resources(self) -> Resources: ...
    @property
    def array(self) -> ArraySpec | None: ...


def spec_hash_of(metadata: Metadata, spec: RunDefining) -> str:
    """Hash of the run-defining fields of `spec` and the restart annotation of `metadata`."""
    runtime_env = spec.runtime_env
    if spec.array is not None and runtime_env is not None:
        # An array element's size changes when elements are added or removed; that alone
        # must not re-run the elements that stay (specs/task/arrays.py sets it).
        env = {k: v for k, v in (runtime_env.get("env_vars") or {}).items()}
        env.pop(ARRAY_SIZE_VAR, None)
        runtime_env = {**runtime_env, "env_vars": env}

    def encode(value: object) -> str:
        return "null" if value is None else _HASH_JSON.encode(value)

    # {"entrypoint", "resources", "restartedAt", "runtimeEnv"}, keys in sorted order; the
    # resources without bundles, which only shape the autoscaler's request (no new run)
    blob = (
        f'{{"entrypoint":{encode(spec.entrypoint)},'
        f'"resources":{_resources_json(spec.resources)},'
        f'"restartedAt":{encode(metadata.annotations.get(RESTARTED_AT))},'
        f'"runtimeEnv":{encode(runtime_env)}}}'
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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
    # autoscaling: it waits for nodes the autoscaler was asked for, or gave up on them
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
    # a status file naming a run that our own record does not prove is the task's: ignored and
    # written anew (a log event, never a task's status; specs/task/ownership.py)
    STATUS_IGNORED = "StatusIgnored"
    # a transition the state machine refuses: a bug, logged; the task keeps its status
    ILLEGAL_TRANSITION = "IllegalTransition"
    # _queues.yaml is invalid and none was ever valid: every task is in one default queue
    QUEUE_CONFIG_INVALID = "QueueConfigInvalid"
    # a run that holds more than it declares, beyond the margin (the Overusing condition), or
    # that was stopped for it (its queue's `overuse: Stop`)
    OVERUSING = "Overusing"
    # the Overusing condition of a task whose run `overuse: Stop` stopped, until its next run
    OVERUSE_STOP = "OveruseStop"


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
    OVERUSING = "Overusing"


class Condition(DocumentModel):
    """An abnormal state a task is in, Kubernetes style; listed only while it holds."""

    type: str
    status: Literal["True", "False", "Unknown"] = "True"
    reason: str
    message: str = ""
    last_transition_time: Timestamp


class SourceRef(DocumentModel):
    """The commit a run's spec came from (GitOps), as Flux writes revisions."""

    revision: str  # main@sha1:<40 hex>, or sha1:<40 hex> on a detached HEAD
    dirty: bool = False  # the file differed from that commit when the run started
