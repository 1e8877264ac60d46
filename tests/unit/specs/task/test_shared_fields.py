"""Models share what they may: equal field sets are one object, and copies leave them intact."""

from __future__ import annotations

from specs.task.models import Metadata, Phase
from specs.task.status import TaskStatus, TaskStatusBody
from specs.yamlio.parse import parse_task

SPEC = b"apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: 'true'\n  resources: {cpu: 1}\n"


def body(**fields: object) -> TaskStatusBody:
    return TaskStatusBody(phase=Phase.QUEUED, uid="u", **fields)


def test_equal_field_sets_are_one_object() -> None:
    a, b = parse_task(SPEC, file="a.yaml"), parse_task(SPEC, file="b.yaml")
    # A parsed spec is a slotted record without a field set; its
    # model, built for a dump, still shares one.
    assert not hasattr(a.spec, "__dict__") and not hasattr(a.spec, "__pydantic_fields_set__")
    assert a.spec.to_model().__pydantic_fields_set__ is b.spec.to_model().__pydantic_fields_set__


def test_a_status_body_is_a_record_without_a_dict_of_its_own() -> None:
    # The loop's statuses are plain records, not pydantic models.
    first, other = body(), body()
    assert not hasattr(first, "__dict__") and not hasattr(first, "__pydantic_fields_set__")
    assert first.conditions is other.conditions  # one empty list for all
    moved = first.model_copy(update={"queue_position": 4})
    assert moved.queue_position == 4 and first.queue_position is None
    assert moved.uid is first.uid and moved.conditions is first.conditions
    # Defaults are left out on request, as pydantic's exclude_defaults did.
    status = TaskStatus(metadata=Metadata(name="t"), status=moved)
    assert status.status.model_dump(exclude_defaults=True) == {
        "phase": Phase.QUEUED,
        "uid": "u",
        "queue_position": 4,
    }


def test_specs_without_metadata_share_one_empty_metadata() -> None:
    a, b = parse_task(SPEC, file="a.yaml"), parse_task(SPEC, file="b.yaml")
    assert a.metadata is b.metadata
    assert a.metadata == Metadata() and a.metadata.model_fields_set == set()
    # Written back, it is still left out, and a spec that has metadata keeps its own.
    assert "metadata" not in a.to_document()
    named = parse_task(SPEC + b"metadata:\n  name: a\n", file="a.yaml")
    assert named.metadata.name == "a" and named.metadata is not a.metadata
