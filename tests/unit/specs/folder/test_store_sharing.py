"""The store and the loop keep one object where many are equal (to keep memory small): each
rule gives values equal to what the unshared form gives."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from specs.cluster import Capacity
from specs.folder.paths import pack_key, pack_stat, packed_mtime_ns
from specs.folder.store import TaskStore
from specs.task.inputs import TaskInput
from tests.support.specs import write_task
from tests.support.world import World

_KEY = st.tuples(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),  # st_mtime_ns (before 1970: < 0)
    st.integers(min_value=0, max_value=2**64 - 1),  # st_size
    st.integers(min_value=0, max_value=2**64 - 1),  # st_ino
)


@given(a=_KEY, b=_KEY)
def test_a_packed_stat_key_is_equal_exactly_when_the_key_is(
    a: tuple[int, int, int], b: tuple[int, int, int]
) -> None:
    assert (pack_key(a) == pack_key(b)) == (a == b)
    assert packed_mtime_ns(pack_key(a)) == a[0]  # the settle rule reads the time back


def test_a_file_s_packed_key_is_its_stat_key_packed(tmp_path: Path) -> None:
    path = write_task(tmp_path, "a")
    st_ = os.stat(path)
    assert pack_stat(st_) == pack_key((st_.st_mtime_ns, st_.st_size, st_.st_ino))


def test_an_entry_keeps_the_root_and_its_relative_path(tmp_path: Path) -> None:
    write_task(tmp_path, "a")
    (tmp_path / "team-a").mkdir()
    write_task(tmp_path / "team-a", "b")
    store = TaskStore(tmp_path)
    entries = store.scan()
    a, b = entries["a"], entries["team-a/b"]
    assert a.path == tmp_path / "a.yaml" and b.path == tmp_path / "team-a/b.yaml"
    assert a.base is b.base  # one Path for all
    # Equal to (and hashed as) the record holding its whole path as `base`.
    whole = TaskInput(
        b.name,
        b.task,
        b.error,
        b.last_valid,
        b.spec_hash,
        b.source,
        b.path,
        "",
        b.raw_hash,
        b.generation,
    )
    assert whole == b and hash(whole) == hash(b)
    assert whole != replace(whole, base=a.path)


def test_a_name_is_one_string_across_walks_and_edits(tmp_path: Path) -> None:
    write_task(tmp_path, "a")
    write_task(tmp_path, "b")
    store = TaskStore(tmp_path)
    first = store.scan()
    write_task(tmp_path, "b", "python edited.py")  # read anew: a new entry, the same name
    again = store.scan()
    assert again["a"] is first["a"]  # unchanged: the parse cache (by relative path) held
    assert again["b"] is not first["b"] and again["b"].generation > first["b"].generation
    assert again["b"].task is not None and again["b"].task.spec.entrypoint == "python edited.py"
    assert again["b"].name is first["b"].name
    assert next(k for k in again if k == "b") is first["b"].name
    assert again["b"].rel is first["b"].rel


def test_the_parse_cache_starts_afresh_when_the_root_link_moves(tmp_path: Path) -> None:
    # The same file (a hard link) under two trees: a walk of the new tree reads it again, as
    # when the cache was keyed by the whole path.
    (tmp_path / "wt/v1").mkdir(parents=True)
    (tmp_path / "wt/v2").mkdir(parents=True)
    write_task(tmp_path / "wt/v1", "a")
    os.link(tmp_path / "wt/v1/a.yaml", tmp_path / "wt/v2/a.yaml")
    link = tmp_path / "tasks"
    link.symlink_to(tmp_path / "wt/v1", target_is_directory=True)
    store = TaskStore(link)
    before = store.scan()["a"]
    swap = tmp_path / "tasks.new"
    swap.symlink_to(tmp_path / "wt/v2", target_is_directory=True)
    os.replace(swap, link)
    after = store.scan()["a"]
    assert after.generation > before.generation
    assert after.task == before.task and after.path == link / "a.yaml"


def test_a_rebuilt_version_map_keeps_the_equal_versions(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_task(tmp_path, name)
    w = World.build(tmp_path, Capacity(2, 0, 16 * 2**30), queue_id="q")
    rec: Any = w.reconciler
    w.step(3)
    before = dict(rec.changes.versions)
    write_task(tmp_path, "b", "python edited.py")
    w.step()  # no events: a full walk, and the versions rebuilt
    assert rec.changes.full is True
    after = rec.changes.versions
    # Keys, not order: the planner reads the map by name, and with git's sources the inputs
    # come in the order of the names read (a set), not of the folder's scan.
    assert after.keys() == before.keys() == rec._specs.inputs.keys()
    for name, version in after.items():  # equal to a fresh build of each
        assert version.spec == rec._specs.inputs[name].generation, name
    assert after["a"] is before["a"]  # unchanged: the same object
    assert after["b"] != before["b"]


def test_a_sidecar_read_is_kept_under_the_spec_s_name_string(tmp_path: Path) -> None:
    from specs.task.models import Phase
    from specs.task.records import NameMetadata
    from specs.task.status import TaskStatus, TaskStatusBody

    write_task(tmp_path, "a")
    writer = TaskStore(tmp_path)
    status = TaskStatus(NameMetadata("a"), TaskStatusBody(phase=Phase.QUEUED))
    writer.write_status("a", status)
    store = TaskStore(tmp_path)
    entries = store.scan()
    read = store.read_statuses()
    assert read["a"].status == status.status
    assert next(k for k in store._statuses.sidecars if k == "a") is entries["a"].name


def test_a_broken_edit_keeps_the_last_valid_task_and_a_fix_reads_anew(tmp_path: Path) -> None:
    write_task(tmp_path, "a", "python one.py")
    store = TaskStore(tmp_path)
    good = store.scan()["a"]
    (tmp_path / "a.yaml").write_text("spec: [")
    broken = store.scan()["a"]
    assert broken.task is None and broken.last_valid == good.task
    assert store.scan()["a"] is broken  # the same reads: the same entry
    write_task(tmp_path, "a", "python two.py")
    fixed = store.scan()["a"]
    assert fixed.task is not None and fixed.last_valid is fixed.task
    assert fixed.generation > broken.generation
    assert store.scan()["a"] is fixed
