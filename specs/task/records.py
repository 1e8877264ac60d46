"""The lean records a task is inside the loop: `Task` and `TaskSpec` with the pydantic models'
field names (specs.task.models validates files through TaskModel and TaskSpecModel), and
`NameMetadata`, a status's metadata that is its name alone."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, Self

from specs.task.models import (
    NO_TEXTS,
    ArraySpec,
    DocumentModel,
    Metadata,
    Resources,
    TaskModel,
    TaskSpecModel,
    spec_hash_of,
)
from specs.task.pipeline import DependencySpec, RetrySpec


class _Record:
    """A lean record: slots, no dict, no field set, a fraction of a pydantic model's size.
    Built unvalidated (`unchecked`) from values a model or a strict check validated; built
    with keywords, it validates them with its model, as the model's constructor does."""

    __slots__: tuple[str, ...] = ()

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.unchecked = classmethod(_maker(cls))  # type: ignore[assignment]

    @classmethod
    def unchecked(cls, values: Iterable[object]) -> Self:
        """A record of `values` (one per slot, in order), not validated."""
        raise NotImplementedError  # each subclass gets its own (__init_subclass__)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def _asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self).unchecked, (self._values(),))

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A copy with some fields changed, not validated (as pydantic's model_copy)."""
        if not update:
            return self
        return self.unchecked(update.get(name, getattr(self, name)) for name in self.__slots__)

    def model_dump(self, **options: Any) -> dict[str, Any]:
        """What the model's model_dump gives with the same options."""
        return self.to_model().model_dump(**options)

    def to_model(self) -> DocumentModel:
        """The pydantic model of these values (for dumps), not validated again."""
        raise NotImplementedError


def _maker(cls: type[_Record]) -> Any:
    """`unchecked` for `cls`, written out: a cold start builds two records per spec, and a loop
    of setattr calls would cost as much as the rest of a plain spec's check."""
    names = cls.__slots__
    args = ", ".join(f"v{i}" for i in range(len(names)))
    setters = {f"s{i}": getattr(cls, name).__set__ for i, name in enumerate(names)}
    body = "".join(f"    s{i}(r, v{i})\n" for i in range(len(names)))
    source = (
        f"def unchecked(cls, values):\n    {args}, = values\n    r = new(cls)\n{body}    return r\n"
    )
    scope: dict[str, Any] = {"new": object.__new__, **setters}
    exec(source, scope)  # our own text, made of the slot names
    return scope["unchecked"]


def _models_of(data: Any) -> Any:
    """`data` with a lean spec in it taken as its model (so pydantic accepts it)."""
    if isinstance(data, Mapping) and any(isinstance(v, _Record) for v in data.values()):
        return {k: v.to_model() if isinstance(v, _Record) else v for k, v in data.items()}
    return data


class TaskSpec(_Record):
    """A task's spec inside the loop: a slotted record, not the pydantic model. Same fields
    as TaskSpecModel, which validates every spec read from a file (specs/yamlio/parse.py builds
    plain specs directly after a strict check: specs/yamlio/plainspec.py). A new field goes into
    both, in the same place (tests/unit/specs/task/test_task_records_match_models.py checks)."""

    __slots__ = (  # noqa: RUF023 - the model's field order (from_model relies on it)
        "entrypoint",
        "runtime_env",
        "priority",
        "resources",
        "timeout_seconds",
        "suspend",
        "submission_id",
        "max_lost_restarts",
        "retry",
        "depends_on",
        "preemptible",
        "resumable",
        "array",
    )

    entrypoint: str
    runtime_env: dict[str, Any] | None
    priority: int
    resources: Resources
    timeout_seconds: float
    suspend: bool
    submission_id: str | None
    max_lost_restarts: int | None
    retry: RetrySpec | None
    depends_on: list[DependencySpec]
    preemptible: bool
    resumable: bool
    array: ArraySpec | None

    def __init__(self, **data: Any) -> None:
        values = _SPEC_VALUES(TaskSpecModel.model_validate(_models_of(data)))
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    @classmethod
    def model_validate(cls, data: Any) -> TaskSpec:
        """Validated as a file's spec is (pydantic's ValidationError if it is not one)."""
        return cls.from_model(TaskSpecModel.model_validate(_models_of(data)))

    @classmethod
    def from_model(cls, model: TaskSpecModel) -> TaskSpec:
        return cls.unchecked(_SPEC_VALUES(model))

    def to_model(self) -> TaskSpecModel:
        return TaskSpecModel.model_construct(**self._asdict())


class Task(_Record):
    """A task inside the loop: a slotted record (see TaskSpec); TaskModel validates files,
    and API responses and YAML are written through it (to_document)."""

    __slots__ = ("api_version", "kind", "metadata", "spec")

    api_version: Literal["rayqueue/v1"]
    kind: Literal["Task"]
    metadata: Metadata
    spec: TaskSpec

    def __init__(self, **data: Any) -> None:
        model = TaskModel.model_validate(_models_of(data))
        values = (model.api_version, model.kind, model.metadata, TaskSpec.from_model(model.spec))
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def spec_hash(self) -> str:
        """Hash of the run-defining fields; a change to any of them means a new run."""
        return spec_hash_of(self.metadata, self.spec)

    @classmethod
    def model_validate(cls, data: Any) -> Task:
        """Validated as a file is (pydantic's ValidationError if it is not a task)."""
        return cls.from_model(TaskModel.model_validate(_models_of(data)))

    @classmethod
    def from_model(cls, model: TaskModel) -> Task:
        spec = TaskSpec.from_model(model.spec)
        return cls.unchecked((model.api_version, model.kind, model.metadata, spec))

    def to_model(self) -> TaskModel:
        return TaskModel.model_construct(
            api_version=self.api_version,
            kind=self.kind,
            metadata=self.metadata,
            spec=self.spec.to_model(),
        )

    def to_document(self) -> dict[str, Any]:
        """The plain dict to write as YAML, without defaults the user did not set."""
        return self.to_model().to_document()


class NameMetadata(_Record):
    """A status's metadata that is its name alone (as every status the loop writes): one slot,
    not a pydantic Metadata. It reads, compares (also with an equal
    Metadata), dumps and copies as Metadata(name=name) does."""

    __slots__ = ("name",)

    name: str | None

    def __init__(self, name: str | None = None) -> None:
        object.__setattr__(self, "name", name)

    @property
    def labels(self) -> dict[str, str]:
        return NO_TEXTS

    @property
    def annotations(self) -> dict[str, str]:
        return NO_TEXTS

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Metadata):
            return other == self.to_model()
        return super().__eq__(other)

    def __hash__(self) -> int:
        return hash((NameMetadata, self.name))

    def to_model(self) -> Metadata:
        return Metadata(name=self.name)

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        if not update:
            return self
        return self.to_model().model_copy(update=update)  # type: ignore[return-value]


def name_metadata(metadata: Metadata | NameMetadata) -> Metadata | NameMetadata:
    """`metadata` as a NameMetadata when it is the name alone, else as it is."""
    if type(metadata) is Metadata and not metadata.labels and not metadata.annotations:
        return NameMetadata(metadata.name)
    return metadata


_SPEC_VALUES: Final = operator.attrgetter(*TaskSpec.__slots__)
