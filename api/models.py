"""Request and response bodies, one model per use. The legacy ones keep the legacy field names."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Bounds that keep the written spec valid (see specs.task.models); the legacy API has none, but
# no cluster has a billion CPUs or an exabyte of memory.
_MAX_UNITS = 1_000_000_000
_MAX_MEMORY_GB = 2**30


class AddTaskRequest(BaseModel):
    """The legacy API's body, field for field. Unknown fields are ignored, as there."""

    name: str = Field(min_length=1, examples=["my_job"])
    entrypoint: str = Field(min_length=1, examples=["python examples/scheduler/test.py"])
    runtime_env: dict[str, Any] = Field(
        default_factory=dict, examples=[{"working_dir": "/home/ray/src/mlumina"}]
    )
    priority: int = Field(default=0, ge=0, le=9, description="0..9; 9 runs first")
    cpu: int = Field(default=0, ge=0, le=_MAX_UNITS)
    gpu: int = Field(default=0, ge=0, le=_MAX_UNITS)
    memory: int = Field(default=0, ge=0, le=_MAX_MEMORY_GB, description="GB (GiB)")
    timeout: int = Field(default=0, ge=0, le=_MAX_UNITS, description="seconds; 0 means none")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        # The name becomes part of the Ray submission id, which Ray puts into URL paths.
        if any(c in value for c in "/?#\\") or not value.isprintable():
            raise ValueError(
                "name must not contain '/', '?', '#', '\\' or control characters "
                "(it becomes part of the Ray submission id)"
            )
        return value

    @field_validator("entrypoint")
    @classmethod
    def _entrypoint(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("entrypoint must not be blank")
        return value


class AddTaskResponse(BaseModel):
    task_id: str = Field(description="the old id; also the Ray submission id of the first run")
    task: str = Field(description="the task's name in the resource API (GET /tasks/{task})")


class TaskIdRequest(BaseModel):
    """Body (or query) of POST /cancel_task."""

    model_config = ConfigDict(extra="ignore")

    task_id: str = Field(min_length=1)


class ChangePriorityRequest(TaskIdRequest):
    """Body (or query) of POST /change_task_priority."""

    priority: int = Field(ge=0, le=9)


class LegacyTaskState(BaseModel):
    task_id: str
    task: str
    priority: int | None
    suspend: bool | None
    phase: str | None
    reason: str | None = None
    message: str | None = None
    queue_position: int | None = None
    submission_id: str | None = None


class TaskRow(BaseModel):
    """One line of GET /tasks."""

    name: str
    phase: str | None
    reason: str | None = None
    message: str | None = None
    overusing: str | None = Field(
        default=None,
        description="the Overusing condition's message: its run holds more than it declares "
        "(or was stopped for it); null when it does not",
    )
    priority: int | None
    queue: str | None = Field(
        default=None, description="the team queue (with _queues.yaml); null without queues"
    )
    position: int | None = Field(description="place in the queue (1 = next); null if not queued")
    resources: dict[str, Any] | None
    suspend: bool | None
    labels: dict[str, str]
    submissionId: str | None = None
    age: str
    ageSeconds: float


class TaskList(BaseModel):
    items: list[TaskRow]


class Resources(BaseModel):
    cpu: float
    gpu: float
    memory: float = Field(description="bytes")


class ClusterView(BaseModel):
    """What the loop last saw; nulls when there is no loop or it has not seen Ray yet."""

    queueId: str
    policy: str
    capacity: Resources | None
    used: Resources | None
    free: Resources | None
    queued: int | None
    starting: int | None
    running: int | None
    rayAvailable: bool | None
    rayError: str | None
    lastPassAt: str | None
    lastRayOkAt: str | None


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, str]
