"""A parsed spec shares what equal specs hold alike (to keep memory small): its resources, the empty
dependency list, empty labels and annotations, the keys of its runtimeEnv. Shared or not, what
a spec reads, dumps and hashes to is what its own objects gave."""

from __future__ import annotations

import json
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from specs.task.models import Metadata, Resources, _resources_json
from specs.task.records import Task
from specs.yamlio import blockyaml
from specs.yamlio.parse import parse_task

SPEC = (
    "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: run {i}\n  resources:\n    cpu: 1\n"
)


def _task(resources: dict[str, Any], **spec: Any) -> Task:
    doc = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": "run", "resources": resources, **spec},
    }
    return parse_task(yaml.safe_dump(doc), file="t.yaml")


def _views(resources: Resources) -> tuple[object, ...]:
    """Everything the code reads of a Resources: its values with their types, and its dumps."""
    return (
        tuple((type(v), repr(v)) for v in (resources.cpu, resources.gpu, resources.memory)),
        resources.model_dump(),
        resources.model_dump(by_alias=True, exclude={"bundles"}),
        resources.model_dump(by_alias=True, exclude_defaults=True, mode="json"),
        resources.model_dump(exclude_unset=True),
        resources.model_fields_set,
    )


def test_specs_with_equal_resources_share_one_object() -> None:
    a, b = (parse_task(SPEC.format(i=i), file=f"t{i}.yaml") for i in range(2))
    assert a.spec.resources is b.spec.resources
    assert a.spec.entrypoint != b.spec.entrypoint


def test_resources_equal_in_value_but_not_in_dump_are_not_shared() -> None:
    # 1 and 1.0 validate to the same float (shared); `gpu: 0` given is in the field set.
    ones = _task({"cpu": 1}), _task({"cpu": 1.0}), _task({"cpu": 1, "gpu": 0})
    assert ones[0].spec.resources is ones[1].spec.resources
    assert ones[2].spec.resources is not ones[0].spec.resources
    assert ones[2].spec.resources.model_dump(exclude_unset=True) == {"cpu": 1, "gpu": 0}
    bundled = [_task({"cpu": 1, "bundles": [{"cpu": 1}]}) for _ in range(2)]
    assert bundled[0].spec.resources is not bundled[1].spec.resources


_amounts = st.one_of(st.integers(0, 8), st.sampled_from([0.5, 1.0, 2.0, 0.0, -0.0]))
_memory = st.one_of(
    st.just(0), st.integers(2**20, 2**30), st.sampled_from(["512Mi", "1Gi", "1073741824", 0])
)
_resources = st.fixed_dictionaries(
    {}, optional={"cpu": _amounts, "gpu": _amounts, "memory": _memory}
).filter(lambda r: any(r.get(k) for k in ("cpu", "gpu", "memory")))


@settings(max_examples=200, deadline=None)
@given(st.lists(_resources, min_size=1, max_size=8))
def test_each_spec_reads_as_its_own_resources_would(shapes: list[dict[str, Any]]) -> None:
    # In any order of parsing, a spec's (maybe shared) resources read, dump and hash as the
    # Resources validated from its own text alone, which is never shared.
    for shape in shapes:
        task = _task(shape)
        own = Resources.model_validate(shape)
        assert task.spec.resources is not own
        assert _views(task.spec.resources) == _views(own)
        assert task.spec.resources == own
        # spec_hash's part of them (kept per shared object) and the written document
        own_json = json.dumps(
            own.model_dump(by_alias=True, exclude={"bundles"}),
            sort_keys=True,
            separators=(",", ":"),
        )
        assert _resources_json(task.spec.resources) == own_json
        written = own.model_dump(by_alias=True, exclude_defaults=True, mode="json")
        assert task.to_document()["spec"]["resources"] == written


def test_specs_without_dependencies_share_one_empty_list() -> None:
    a, b = _task({"cpu": 1}), _task({"cpu": 2})
    assert a.spec.depends_on == [] and a.spec.depends_on is b.spec.depends_on
    with_deps = _task({"cpu": 1}, dependsOn=[{"name": "x"}])
    assert [d.name for d in with_deps.spec.depends_on] == ["x"]
    assert with_deps.spec.depends_on is not a.spec.depends_on
    assert "dependsOn" not in a.to_document()["spec"]


def test_metadata_without_labels_or_annotations_shares_empty_dicts() -> None:
    a, b = Metadata(name="a"), Metadata(name="b")
    assert a.labels is b.labels and a.annotations is b.labels and a.labels == {}
    assert a.model_dump(by_alias=True, exclude_defaults=True, mode="json") == {"name": "a"}
    kept = Metadata(name="c", labels={"team": "x"})
    assert kept.labels == {"team": "x"} and kept.annotations is a.annotations
    assert kept.model_copy(update={"annotations": {"k": "v"}}).annotations == {"k": "v"}
    assert a.annotations == {}  # the copy's dict is its own


def test_runtime_env_keys_are_one_object_across_files() -> None:
    env = "  runtimeEnv:\n    env_vars:\n      RUN_ID: r{i}\n"
    texts = [SPEC.format(i=i) + env.format(i=i) for i in (1, 2)]
    a, b = (blockyaml.load(t) for t in texts)
    assert a is not None and b is not None
    (key_a,) = a["spec"]["runtimeEnv"]["env_vars"]
    (key_b,) = b["spec"]["runtimeEnv"]["env_vars"]
    assert key_a == "RUN_ID" and key_a is key_b
