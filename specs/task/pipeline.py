"""The spec fields that chain runs: `spec.retry` and `spec.dependsOn`.

Kept apart from models.py so the reconciler's pure retry and dependency logic, and their
tests, can use them without the rest of the Task model.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

RetryOutcome = Literal["Failed", "Lost", "TimedOut"]
DependencyCondition = Literal["Succeeded", "Failed", "Finished"]

# Exit codes are 0..255; a driver killed by signal N reports -N.
ExitCode = Annotated[int, Field(ge=-255, le=255)]

MAX_RETRY_LIMIT = 100
MAX_DEPENDENCIES = 100


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
    )


def _default_on() -> list[RetryOutcome]:
    return ["Failed", "Lost"]


class RetrySpec(_Model):
    """How often, after how long, and on which outcomes a finished run is tried again."""

    limit: int = Field(
        default=0, ge=0, le=MAX_RETRY_LIMIT, description="runs after the first; 0: none"
    )
    backoff_seconds: float = Field(
        default=10.0, ge=0, le=86_400, allow_inf_nan=False, description="delay before retry 1"
    )
    factor: float = Field(
        default=2.0, ge=1, le=100, allow_inf_nan=False, description="each further delay x this"
    )
    max_backoff_seconds: float = Field(
        default=600.0, ge=0, le=604_800, allow_inf_nan=False, description="cap on every delay"
    )
    on: list[RetryOutcome] = Field(
        default_factory=_default_on, max_length=3, description="outcomes retried"
    )
    non_retryable_exit_codes: list[ExitCode] = Field(
        default_factory=list,
        max_length=256,
        description="a run that exits with one of these is final",
    )


class DependencySpec(_Model):
    """One task this task waits for, and the end of its latest run that lets this one go."""

    name: str = Field(min_length=1, max_length=512, description="a task name, as `rayqueue get`")
    condition: DependencyCondition = "Succeeded"
