"""A scan that file events name nothing for (the loop's timer passes, many a second on a busy
queue) reads nothing and copies none of the store's kept maps; scans with events after it
still see every change."""

from __future__ import annotations

import os
from pathlib import Path

from specs.folder.store import TaskStore

SPEC = "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: x\n  resources: {{cpu: {cpu}}}\n"


def _put(root: Path, name: str, cpu: int) -> str:
    path = root / f"{name}.yaml"
    path.write_text(SPEC.format(cpu=cpu))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + cpu * 1_000_000_000))
    return str(path)


def test_a_scan_named_nothing_keeps_the_maps_and_a_later_event_sees_the_edit(
    tmp_path: Path,
) -> None:
    for i in range(3):
        _put(tmp_path, f"t{i}", 1)
    store = TaskStore(tmp_path)
    walked, changes = store.scan_changes(None)
    assert changes is None and sorted(walked) == ["t0", "t1", "t2"]
    kept, parsed = store._specs.entries, store._specs.parsed
    quiet, changes = store.scan_changes(set())
    assert changes == set() and quiet == walked
    assert store._specs.entries is kept and store._specs.parsed is parsed  # nothing copied
    quiet["t0"] = quiet["t1"]  # what a caller is handed is its own
    assert store.scan_changes(set())[0] == walked
    edited = _put(tmp_path, "t1", 2)
    after, changes = store.scan_changes({edited})
    assert changes == {"t1"}
    assert after["t1"].generation > walked["t1"].generation
    assert after["t1"].task is not None and after["t1"].task.spec.resources.cpu == 2
    assert {n: e.generation for n, e in after.items() if n != "t1"} == {
        n: e.generation for n, e in walked.items() if n != "t1"
    }
    assert store.scan_changes(set()) == (after, set())
