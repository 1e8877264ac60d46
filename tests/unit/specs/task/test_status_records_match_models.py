"""The loop's plain status records write exactly what the pydantic models write.

Inside the loop a status is a plain record (specs/task/models.py TaskStatus, TaskStatusBody);
pydantic (TaskStatusModel, TaskStatusBodyModel) validates it at the file boundary only. For any
status, the record's document, its sidecar text and its dumps equal the model's, and a
sidecar read back gives the same record.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from specs.task.models import Condition, Metadata, Phase, Reason, SourceRef
from specs.task.status import TaskStatus, TaskStatusBody, TaskStatusBodyModel, TaskStatusModel
from specs.yamlio.dump import dump_status
from specs.yamlio.parse import parse_status

_WORDS = st.text(alphabet="abcXYZ019-_ :>\n#'\"", max_size=12)
_TEXT = st.none() | _WORDS | st.sampled_from(list(Reason))
_TIMES = st.none() | st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))
_OFFSET = st.sampled_from([UTC, UTC, datetime.now().astimezone().tzinfo])
_COUNTS = st.integers(min_value=0, max_value=3) | st.integers(min_value=-5, max_value=10**6)
_CONDITIONS = st.lists(
    st.builds(
        lambda **fields: Condition(**fields),  # by field name (its signature has the aliases)
        type=st.sampled_from(["Preempted", "QueueConfigInvalid"]),
        status=st.sampled_from(["True", "False", "Unknown"]),
        reason=_WORDS,
        message=st.sampled_from(["", "preempted by b"]),
        last_transition_time=st.datetimes(timezones=st.just(UTC)),
    ),
    max_size=2,
)
_SOURCES = st.none() | st.builds(
    SourceRef, revision=st.just("main@sha1:" + "a" * 40), dirty=st.booleans()
)


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {"phase": draw(st.sampled_from(list(Phase)))}
    for name in TaskStatusBody._fields[1:]:
        annotation = str(TaskStatusBodyModel.model_fields[name].annotation)
        if not draw(st.booleans()):
            continue  # left at its default
        if name == "conditions":
            fields[name] = draw(_CONDITIONS)
        elif name == "source":
            fields[name] = draw(_SOURCES)
        elif name == "after_preemption":
            fields[name] = draw(st.booleans())
        elif "datetime" in annotation:
            time = draw(_TIMES)
            fields[name] = time if time is None else time.astimezone(draw(_OFFSET))
        elif "int" in annotation:
            fields[name] = draw(_COUNTS if "None" not in annotation else st.none() | _COUNTS)
        else:
            fields[name] = draw(_TEXT)
    return fields


def _ordered(document: dict[str, Any]) -> str:
    return json.dumps(document, default=str)  # keys in order: the sidecar's order


@settings(max_examples=400, deadline=None)
@given(bodies(), st.sampled_from([None, "t", "t-0001"]))
def test_a_status_record_writes_what_the_model_writes(fields: dict[str, Any], name: str) -> None:
    model = TaskStatusModel(metadata=Metadata(name=name), status=TaskStatusBodyModel(**fields))
    record = TaskStatus(metadata=Metadata(name=name), status=TaskStatusBody(**fields))
    assert _ordered(record.to_document()) == _ordered(model.to_document())
    for args in ({}, {"by_alias": True}, {"exclude_defaults": True}, {"mode": "json"}):
        assert record.status.model_dump(**args) == model.status.model_dump(**args)
    # The converted record is the one built directly, and a sidecar reads back as it.
    assert TaskStatus.from_model(model) == record
    text = dump_status(record)
    assert text == dump_status(TaskStatus.from_model(model))
    back = parse_status(text)
    assert back == TaskStatus.model_validate(model.to_document())
    assert _ordered(back.to_document()) == _ordered(record.to_document())


def test_metadata_with_labels_is_written_as_the_model_wrote_it() -> None:
    metadata = Metadata(name="t", labels={"team": "a"})
    body = TaskStatusBody(phase=Phase.QUEUED, reason=Reason.QUEUED, run=1)
    model = TaskStatusModel(
        metadata=metadata, status=TaskStatusBodyModel(phase=Phase.QUEUED, reason="Queued", run=1)
    )
    assert _ordered(TaskStatus(metadata=metadata, status=body).to_document()) == _ordered(
        model.to_document()
    )


def test_a_copy_changes_only_what_it_names_and_an_empty_update_is_the_same_record() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    body = TaskStatusBody(phase=Phase.QUEUED, uid="u", queued_at=start)
    moved = body.model_copy(update={"queue_position": 3, "queued_at": start + timedelta(1)})
    assert (moved.queue_position, moved.queued_at, moved.uid) == (3, start + timedelta(1), "u")
    assert body.queue_position is None and body.queued_at == start
    assert body.model_copy() is body and body.model_copy(update={}) is body
    status = TaskStatus(metadata=Metadata(name="t"), status=body)
    assert status.model_copy(update={"status": moved}).status is moved


def test_a_sidecar_without_conditions_shares_the_one_empty_list() -> None:
    text = (
        "apiVersion: rayqueue/v1\nkind: TaskStatus\nmetadata: {name: a}\nstatus: {phase: Queued}\n"
    )
    a, b = parse_status(text), parse_status(text.replace("name: a", "name: b"))
    assert a.status.conditions == [] and a.status.conditions is b.status.conditions
    assert type(a.status) is TaskStatusBody and a.status.phase is Phase.QUEUED


def test_a_changed_status_keeps_the_metadata_object_of_the_one_before() -> None:
    from tests.support.planner_world import PlanWorld, task

    w = PlanWorld({"a": task(), "b": task()})
    w.step()
    first = {name: w.statuses[name] for name in ("a", "b")}
    assert first["a"].metadata == Metadata(name="a")
    w.ray("a", "RUNNING")
    w.step()
    assert w.statuses["a"] is not first["a"]  # its status changed ...
    assert w.statuses["a"].metadata is first["a"].metadata  # ... its metadata is the same
    # A sidecar with labels (edited by hand) is still written with its name alone.
    labelled = Metadata(name="b", labels={"x": "y"})
    w.statuses["b"] = first["b"].model_copy(update={"metadata": labelled})
    w.ray("b", "RUNNING")
    w.step()
    assert w.statuses["b"].metadata == Metadata(name="b")


def test_the_record_and_the_model_have_the_same_fields_in_order_and_defaults() -> None:
    # A field added to one and not the other would be lost on the way to or from a file.
    assert TaskStatusBody._fields == tuple(TaskStatusBodyModel.model_fields)
    for name, field in TaskStatusBodyModel.model_fields.items():
        if name != "phase":
            model_default = field.get_default(call_default_factory=True)
            assert TaskStatusBody._field_defaults[name] == model_default, name
