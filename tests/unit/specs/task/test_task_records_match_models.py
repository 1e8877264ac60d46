"""The loop's Task and TaskSpec are slotted records and plain specs are built without pydantic
(specs/yamlio/plainspec.py); both give exactly what the pydantic models give: the same values,
spec_hash, dumps and Invalid messages."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import bigfolder
from specs.cluster import Capacity
from specs.task.models import Metadata, Resources, TaskModel, TaskSpecModel, request_capacity
from specs.task.records import NameMetadata, Task, TaskSpec
from specs.yamlio import parse, plainspec
from specs.yamlio.dump import dump_task
from specs.yamlio.parse import SpecParseError, parse_task

FILE = "t.yaml"


def old_parse_task(text: str) -> TaskModel:
    """parse_task as it was: the model on the fast path, else the line-accurate path."""

    def run() -> TaskModel:
        decoded = parse._decode(text, FILE)
        fast = parse._fast_single(decoded, TaskModel)
        if fast is not None:
            return fast
        return parse._parse_single(decoded, FILE, TaskModel)[0]

    return parse._guarded(FILE, run)


def outcome(run: Any) -> tuple[Any, list[str] | None]:
    try:
        return run(), None
    except SpecParseError as exc:
        return None, [str(e) for e in exc.errors]


def assert_same(new: Task, old: TaskModel) -> None:
    """Equal values of equal types (1 == 1.0, but they dump differently), hash and dumps."""
    assert new == Task.from_model(old)
    for name in Task.__slots__[:3]:
        assert repr(getattr(new, name)) == repr(getattr(old, name))
    for name in TaskSpec.__slots__:
        assert repr(getattr(new.spec, name)) == repr(getattr(old.spec, name)), name
    assert new.spec_hash() == old.spec_hash()
    assert new.to_document() == old.to_document()
    assert repr(new.to_document()) == repr(old.to_document())
    assert new.model_dump() == old.model_dump()
    assert new.model_dump(by_alias=True, mode="json") == old.model_dump(by_alias=True, mode="json")
    assert dump_task(new) == dump_task(Task.from_model(old))


# --- random documents, valid and not ----------------------------------------------------------

odd = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 12),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(-0.0),
    st.sampled_from(["", " ", "3", "1.5", "512Mi", "4Gi", "2G", "x", "-1", "true", "rq-1"]),
    st.text(max_size=6),
    st.lists(st.integers(), max_size=2),
)
good_numbers = st.one_of(
    st.integers(0, 64), st.floats(0, 64), st.just(-0.0), st.floats(1e8, 1e9), st.just(10**9)
)
numbers = st.one_of(good_numbers, st.floats(1e9, 2e9), st.integers(10**9, 2 * 10**9), odd)
memory = st.one_of(
    st.sampled_from(["512Mi", "4Gi", "2G", "1024B", "0", "1.5Gi", "-1Gi", "9" * 30]), numbers
)
good_resources = st.fixed_dictionaries(
    {}, optional={"cpu": good_numbers, "gpu": good_numbers, "memory": memory}
)
env_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=5,
)
good_env = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["env_vars", "working_dir", "pip"]), env_values, max_size=3),
    st.fixed_dictionaries(
        {"env_vars": st.dictionaries(st.from_regex(r"[A-Z_]{1,5}", fullmatch=True), st.text())}
    ),
)
names = st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)
good_spec = st.fixed_dictionaries(
    {
        "entrypoint": st.one_of(st.just("python x.py"), st.text(min_size=1, max_size=20)),
        "resources": good_resources,
    },
    optional={
        "priority": st.integers(0, 9),
        "timeoutSeconds": good_numbers,
        "suspend": st.booleans(),
        "preemptible": st.booleans(),
        "resumable": st.booleans(),
        "submissionId": names,
        "runtimeEnv": good_env,
    },
)
good_metadata = st.fixed_dictionaries(
    {},
    optional={
        "name": names,
        "labels": st.dictionaries(names, st.text(max_size=4), max_size=2),
        "annotations": st.dictionaries(names, st.text(max_size=4), max_size=2),
    },
)
# What a mutation may put where: odd values anywhere, and values of the right kind out of range.
wrong_values = {
    "entrypoint": st.one_of(st.just(""), st.just("  "), odd),
    "resources": st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "cpu": numbers,
                "gpu": numbers,
                "memory": memory,
                "bundles": st.lists(st.fixed_dictionaries({"cpu": numbers}), max_size=2),
                "cpus": numbers,
            },
        ),
        odd,
    ),
    "priority": st.one_of(st.integers(-1, 10), odd),
    "timeoutSeconds": numbers,
    "suspend": odd,
    "preemptible": odd,
    "resumable": odd,
    "submissionId": st.one_of(st.just("rq-x"), st.just("a/b"), st.text(max_size=8), odd),
    "runtimeEnv": st.one_of(st.dictionaries(st.integers(0, 3), st.text(), min_size=1), odd),
    "runtime_env": good_env,
    "maxLostRestarts": st.integers(-1, 3),
    "dependsOn": st.just([]),
    "typo": st.just(1),
}


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A valid document, and then none, one or two fields changed (or added) at random."""
    document: dict[str, Any] = {"apiVersion": "rayqueue/v1", "kind": "Task"}
    if draw(st.booleans()):
        document["metadata"] = draw(good_metadata)
    document["spec"] = dict(draw(good_spec))
    for _ in range(draw(st.integers(0, 2))):
        where = draw(st.sampled_from(["spec"] * 8 + ["metadata", "apiVersion", "kind", "top"]))
        if where == "spec" and isinstance(document["spec"], dict):
            field = draw(st.sampled_from(sorted(wrong_values)))
            document["spec"][field] = draw(wrong_values[field])
        elif where == "metadata":
            document["metadata"] = draw(st.one_of(odd, st.fixed_dictionaries({"name": odd})))
        elif where in ("top", "spec"):
            document[draw(st.sampled_from(["status", "spec"]))] = draw(odd)
        else:
            document[where] = draw(st.one_of(st.just("Job"), odd))
    return document


def text_of(document: dict[str, Any], flow: bool) -> str:
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=flow, allow_unicode=True)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents(), flow=st.booleans())
def test_the_record_path_gives_what_the_model_gives(document: dict[str, Any], flow: bool) -> None:
    text = text_of(document, flow)
    old, old_errors = outcome(lambda: old_parse_task(text))
    new, new_errors = outcome(lambda: parse_task(text, file=FILE))
    assert new_errors == old_errors  # the same Invalid message, file:line:col and all
    if old is not None:
        assert_same(new, old)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=documents())
def test_a_plain_spec_is_what_the_model_validates(document: dict[str, Any]) -> None:
    plain = plainspec.task_of(document)
    try:
        old = TaskModel.model_validate(document)
    except Exception:
        assert plain is None  # never a task the model refuses
        return
    if plain is not None:
        assert_same(plain, old)


PLAIN = [
    bigfolder.template(3, 7).decode(),
    "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: 'true'\n  resources: {cpu: 1}\n",
    "apiVersion: rayqueue/v1\nkind: Task\nmetadata:\n  name: t\n  labels: {team: a}\n"
    "spec:\n  entrypoint: x\n  priority: 9\n  suspend: true\n  submissionId: my-id\n"
    "  timeoutSeconds: 2.5\n  resources: {gpu: 1, memory: 4Gi}\n",
]


@pytest.mark.parametrize("text", PLAIN)
def test_common_specs_take_the_plain_path(text: str) -> None:
    data = yaml.safe_load(text)
    plain = plainspec.task_of(data)
    assert plain is not None  # else the property above would check only the model's path
    assert_same(plain, old_parse_task(text))
    assert_same(parse_task(text, file=FILE), old_parse_task(text))


def test_plain_resources_are_the_shared_ones() -> None:
    a = parse_task(PLAIN[0], file="a.yaml")
    b = parse_task(bigfolder.template(5, 9).decode(), file="b.yaml")
    assert a.spec.resources is b.spec.resources
    assert a.spec.resources is Task.from_model(old_parse_task(PLAIN[0])).spec.resources


def test_records_have_the_models_fields_in_order_and_no_dict() -> None:
    assert TaskSpec.__slots__ == tuple(TaskSpecModel.model_fields)
    assert Task.__slots__ == tuple(TaskModel.model_fields)
    task = parse_task(PLAIN[0], file=FILE)
    assert not hasattr(task, "__dict__") and not hasattr(task.spec, "__dict__")
    with pytest.raises(AttributeError):
        task.spec.priority = 3  # type: ignore[misc]


def test_keywords_validate_as_the_model_did() -> None:
    spec = TaskSpec(entrypoint="x", resources=Resources(cpu=1), timeout_seconds=3)
    assert spec.timeout_seconds == 3.0 and type(spec.timeout_seconds) is float
    task = Task(apiVersion="rayqueue/v1", kind="Task", spec=spec)
    assert task.metadata == Metadata() and task.spec == spec
    with pytest.raises(ValueError, match="at least one resource"):
        TaskSpec(entrypoint="x", resources=Resources())
    with pytest.raises(ValueError, match="less than or equal to 9"):
        Task.model_validate(
            {
                "apiVersion": "rayqueue/v1",
                "kind": "Task",
                "spec": {"entrypoint": "x", "priority": 10, "resources": {"cpu": 1}},
            }
        )


def test_copies_pickles_and_equality() -> None:
    task = parse_task(PLAIN[2], file=FILE)
    moved = task.model_copy(update={"spec": task.spec.model_copy(update={"priority": 1})})
    assert moved.spec.priority == 1 and task.spec.priority == 9
    assert moved != task and moved.metadata is task.metadata
    assert pickle.loads(pickle.dumps(task)) == task
    assert copy.deepcopy(task) == task and copy.copy(task) == task


def test_a_shared_resources_asks_for_one_capacity() -> None:
    from reconciler.core.task.jobs import request_of

    a = parse_task(PLAIN[0], file="a.yaml")
    b = parse_task(bigfolder.template(5, 9).decode(), file="b.yaml")
    assert request_of(a) is request_of(b)  # one per shared value, not one per task
    assert request_of(a) == Capacity(1.0, 0.0, 512.0 * 2**20)
    own = Resources(cpu=1, bundles=[{"cpu": 1}])  # with bundles: never shared
    assert request_capacity(own) == Capacity(1.0, 0.0, 0.0)
    assert request_capacity(own) is not request_capacity(own)


def test_a_status_names_its_task_with_a_name_only_record() -> None:
    from specs.task.status import TaskStatus, TaskStatusBody
    from specs.yamlio.parse import parse_status

    text = "apiVersion: rayqueue/v1\nkind: TaskStatus\nmetadata:\n  name: a\n"
    text += "status:\n  phase: Queued\n"
    status = parse_status(text)
    assert type(status.metadata) is NameMetadata and not hasattr(status.metadata, "__dict__")
    # It reads, compares and writes as the pydantic Metadata of the name did.
    model = Metadata(name="a")
    assert status.metadata == model and model == status.metadata
    assert status.metadata != Metadata(
        name="a", labels={"x": "y"}
    ) and status.metadata != NameMetadata("b")
    assert status.metadata.labels == {} and status.metadata.annotations == {}
    assert status.metadata.model_dump() == model.model_dump()
    body = TaskStatusBody.model_validate({"phase": "Queued"})
    assert TaskStatus(status.metadata, body).to_document() == TaskStatus(model, body).to_document()
    labelled = status.metadata.model_copy(update={"labels": {"x": "y"}})
    assert type(labelled) is Metadata and labelled.labels == {"x": "y"} and labelled.name == "a"
    # With labels, a status keeps the pydantic Metadata.
    with_labels = parse_status(text.replace("  name: a\n", "  name: a\n  labels: {x: y}\n"))
    assert type(with_labels.metadata) is Metadata
