"""Every field of a status has a cap in bytes: each field that can hold text is filled far
past its cap, and what the store writes, holds and reads back stays within it. The fields are
found from the sidecar's schema, so a field added later is filled too."""

from __future__ import annotations

import typing
from datetime import UTC, datetime
from pathlib import Path
from types import NoneType, UnionType
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from specs.cluster import CUT_MARK, CUT_MARK_FRONT, cut_text
from specs.folder.store import TaskStore
from specs.task.models import Condition, Metadata, Phase, SourceRef
from specs.task.records import NameMetadata
from specs.task.status import (
    LOG_TAIL_BYTES,
    MAX_ITEMS,
    TEXT_BYTES,
    WORD_BYTES,
    TaskStatus,
    TaskStatusBody,
    TaskStatusBodyModel,
    bounded,
)
from specs.yamlio.parse import parse_status

HUGE = "é" * 100_000  # 200,000 bytes of UTF-8: past every cap
WHEN = datetime(2026, 1, 1, tzinfo=UTC)
PLAIN = {int, bool, float, datetime, Phase, NoneType}


def _types(annotation: Any) -> set[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _types(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is UnionType:
        return {t for arg in typing.get_args(annotation) for t in _types(arg)}
    return {origin or annotation}


def _huge_model(model: type[BaseModel]) -> Any:
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        kinds = _types(field.annotation)
        if str in kinds:
            values[name] = HUGE
        elif datetime in kinds:
            values[name] = WHEN
    return model.model_construct(**values)


def _overfilled() -> TaskStatus:
    """A status whose every field that can hold text (or entries) holds far too much."""
    update: dict[str, Any] = {}
    for name, field in TaskStatusBodyModel.model_fields.items():
        kinds = _types(field.annotation)
        if kinds <= PLAIN:
            continue
        if str in kinds:
            update[name] = HUGE
        elif list in kinds:
            update[name] = [_huge_model(Condition) for _ in range(MAX_ITEMS * 3)]
        elif SourceRef in kinds:
            update[name] = _huge_model(SourceRef)
        else:
            raise AssertionError(f"a status field of a type this test cannot fill: {name}")
    body = TaskStatusBody(phase=Phase.FAILED)._replace(**update)
    return TaskStatus(metadata=NameMetadata("team-a/noisy"), status=body)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


CAPS = {"message": TEXT_BYTES, "log_tail": LOG_TAIL_BYTES}  # any other text: WORD_BYTES


def _assert_model_within_caps(model: BaseModel) -> None:
    for field in type(model).model_fields:
        text = getattr(model, field)
        if isinstance(text, str):
            assert _size(text) <= CAPS.get(field, WORD_BYTES), f"{field}: {_size(text)} bytes"


def _assert_within_caps(status: TaskStatus) -> None:
    body = status.status
    for name in TaskStatusBody._fields:
        value = getattr(body, name)
        if isinstance(value, str) and name != "phase":
            assert _size(value) <= CAPS.get(name, WORD_BYTES), f"{name}: {_size(value)} bytes"
        elif isinstance(value, list):
            assert len(value) <= MAX_ITEMS, f"{name}: {len(value)} entries"
            for item in value:
                _assert_model_within_caps(item)
        elif isinstance(value, BaseModel):
            _assert_model_within_caps(value)
    # The whole: every cap at once, and some room for the keys.
    whole = len(yaml.safe_dump(status.to_document(), allow_unicode=True).encode())
    assert whole <= LOG_TAIL_BYTES + (MAX_ITEMS + 1) * (TEXT_BYTES + 3 * WORD_BYTES) + (
        12 * WORD_BYTES
    ), whole


def test_every_field_past_its_cap_is_cut() -> None:
    status = _overfilled()
    capped = bounded(status)
    _assert_within_caps(capped)
    body = capped.status
    assert body.message is not None and body.message.endswith(CUT_MARK)
    assert body.message.startswith("éé")  # a message keeps its start
    assert body.log_tail is not None and body.log_tail.startswith(CUT_MARK_FRONT)  # its end
    assert bounded(capped) is capped  # bounded twice: the same
    assert bounded(TaskStatus(NameMetadata("t"), TaskStatusBody(Phase.QUEUED))).status == (
        TaskStatusBody(Phase.QUEUED)
    )


def test_a_status_within_its_caps_is_the_same_object() -> None:
    status = TaskStatus(
        NameMetadata("t"),
        TaskStatusBody(Phase.FAILED, message="x" * TEXT_BYTES, log_tail="y" * LOG_TAIL_BYTES),
    )
    assert bounded(status) is status


def test_labels_and_annotations_of_a_read_status_are_capped() -> None:
    metadata = Metadata(name="t", labels={f"k{i}": HUGE for i in range(MAX_ITEMS * 2)})
    capped = bounded(TaskStatus(metadata, TaskStatusBody(Phase.QUEUED)))
    assert isinstance(capped.metadata, Metadata)
    assert len(capped.metadata.labels) == MAX_ITEMS
    assert all(_size(v) <= WORD_BYTES for v in capped.metadata.labels.values())


def test_the_store_writes_and_holds_only_capped_statuses(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    store.write_status("noisy", _overfilled())
    store.defer_status("deferred", _overfilled())
    store.flush_statuses(10, 0)
    for name in ("noisy", "deferred"):
        held = store.read_statuses(cached=True)[name]
        _assert_within_caps(held)
        on_disk = store.status_path(name)
        assert on_disk.stat().st_size <= 96 * 1024
        assert parse_status(on_disk.read_bytes()) == held  # what is held is what is written
    store.write_status("sweep[2]", _overfilled())  # an element of an array's sidecar
    _assert_within_caps(store.read_array("sweep")[2])
    _assert_within_caps(store.read_statuses()["noisy"])  # read again from disk


def test_a_sidecar_written_by_hand_is_read_within_the_caps() -> None:
    document = {
        "apiVersion": "rayqueue/v1",
        "kind": "TaskStatus",
        "metadata": {"name": "team-a/forged"},
        "status": {
            "phase": "Failed",
            "message": "m" * 200_000,
            "logTail": "l" * 200_000,
            "conditions": [
                {"type": "X", "reason": "r" * 9000, "lastTransitionTime": WHEN.isoformat()}
            ]
            * 50,
        },
    }
    status = parse_status(yaml.safe_dump(document), file="forged.status.yaml")
    _assert_within_caps(status)


@pytest.mark.parametrize(
    ("text", "limit", "keep_end"),
    [("a" * 10, 5, False), ("é" * 10, 7, True), ("x" * 100, 30, False), ("ok", 2, False)],
)
def test_cut_text_fits_its_limit_and_is_stable(text: str, limit: int, keep_end: bool) -> None:
    cut = cut_text(text, limit, keep_end=keep_end)
    assert _size(cut) <= max(limit, len(CUT_MARK))
    assert cut_text(cut, limit, keep_end=keep_end) == cut
