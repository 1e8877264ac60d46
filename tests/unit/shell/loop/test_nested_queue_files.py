"""Nested queues on disk: `team-a/_queues.yaml` divides team-a; a bad one names its
file, line and field, and its last good text stays in force, the rest of the tree read as it
is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.shell.loop.queuefile import QueueFile
from specs.queues.parse import parse_queue_config
from specs.yamlio.parse import SpecParseError

TOP = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 8}
    - name: team-b
      nominalQuota: {cpu: 8}
"""

SUB = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a/x
      nominalQuota: {cpu: 4}
      weight: 2
    - name: NAME
      nominalQuota: {cpu: 4}
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    st = path.stat()  # a distinct mtime, whatever the file system's resolution
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


@pytest.fixture
def files(tmp_path: Path) -> QueueFile:
    write(tmp_path / "_queues.yaml", TOP)
    return QueueFile(tmp_path / "_queues.yaml", root=tmp_path)


def test_a_teams_own_file_divides_its_queue(files: QueueFile, tmp_path: Path) -> None:
    assert files.load().config.queue_names() == ["team-a", "team-b", "default"]  # type: ignore[union-attr]
    write(tmp_path / "team-a" / "_queues.yaml", SUB.replace("NAME", "team-a/y"))
    loaded = files.load()  # a new file under a queue's folder is seen without a top edit
    assert loaded.config is not None and loaded.state is not None and loaded.state.valid
    assert loaded.config.queue_names() == ["team-a", "team-b", "team-a/x", "team-a/y", "default"]
    assert loaded.config.parent_of("team-a/y") == "team-a"
    assert loaded.config.queue_of("team-a/x/job") == "team-a/x"


@pytest.mark.parametrize(
    ("name", "where", "message"),
    [
        ("team-b/z", "team-a/_queues.yaml:8:13: spec.queues[1].name", "is outside team-a/"),
        ("team-a", "team-a/_queues.yaml:8:13: spec.queues[1].name", "(a cycle)"),
        ("team-a/x", "team-a/_queues.yaml:8:13: spec.queues[1].name", "is listed twice"),
    ],
)
def test_a_bad_sub_queue_file_names_file_line_and_field_and_the_last_good_one_stays(
    files: QueueFile, tmp_path: Path, name: str, where: str, message: str
) -> None:
    write(tmp_path / "team-a" / "_queues.yaml", SUB.replace("NAME", "team-a/y"))
    good = files.load().config
    write(tmp_path / "team-a" / "_queues.yaml", SUB.replace("NAME", name))
    loaded = files.load()
    assert loaded.config == good  # still in force
    assert loaded.state is not None and not loaded.state.valid
    assert loaded.state.error is not None
    assert where in loaded.state.error and message in loaded.state.error


def test_the_depth_limit_is_a_setting(tmp_path: Path) -> None:
    write(tmp_path / "_queues.yaml", TOP)
    write(tmp_path / "team-a" / "_queues.yaml", SUB.replace("NAME", "team-a/x/p"))
    assert QueueFile(tmp_path / "_queues.yaml", root=tmp_path).load().state.valid  # type: ignore[union-attr]
    shallow = QueueFile(tmp_path / "_queues.yaml", root=tmp_path, max_depth=2).load()
    assert shallow.state is not None and not shallow.state.valid
    # team-a's file is set aside; the top file is in force without it
    assert shallow.config is not None
    assert shallow.config.queue_names() == ["team-a", "team-b", "default"]
    assert "team-a/_queues.yaml:8:13: spec.queues[1].name" in (shallow.state.error or "")
    assert "3 levels deep; queues nest at most 2" in (shallow.state.error or "")


def test_only_the_top_file_sets_the_cluster_wide_sections(files: QueueFile, tmp_path: Path) -> None:
    text = SUB.replace("NAME", "team-a/y") + "  fairSharing: {mode: CurrentUsage}\n"
    write(tmp_path / "team-a" / "_queues.yaml", text)
    error = files.load().state.error or ""  # type: ignore[union-attr]
    assert "team-a/_queues.yaml:10:16: spec.fairSharing: fairSharing is set in the top" in error


def test_a_sub_queue_listed_in_two_files_is_an_error(files: QueueFile, tmp_path: Path) -> None:
    write(tmp_path / "_queues.yaml", TOP + "    - name: team-a/x\n")
    write(tmp_path / "team-a" / "_queues.yaml", SUB.replace("NAME", "team-a/y"))
    error = files.load().state.error or ""  # type: ignore[union-attr]
    assert "team-a/_queues.yaml:5:13: spec.queues[0].name" in error
    assert "listed in another _queues.yaml" in error


def test_the_top_file_alone_may_nest_too_within_the_depth_limit() -> None:
    deep = TOP + "    - name: team-a/x\n    - name: team-a/x/p\n    - name: team-a/x/p/q\n"
    with pytest.raises(SpecParseError) as raised:
        parse_queue_config(deep)
    assert "_queues.yaml:11:13: spec.queues[4].name" in str(raised.value)
    assert parse_queue_config(deep, max_depth=4).depth_of("team-a/x/p/q") == 4


def test_a_teams_bad_file_holds_back_neither_the_top_files_edit_nor_another_teams_file(
    files: QueueFile, tmp_path: Path
) -> None:
    write(tmp_path / "team-a" / "_queues.yaml", SUB.replace("NAME", "team-a/y"))
    write(
        tmp_path / "team-b" / "_queues.yaml",
        SUB.replace("team-a/x", "team-b/p").replace("NAME", "team-b/q"),
    )
    assert files.load().state.valid  # type: ignore[union-attr]
    # team-a breaks its own file; the admin then lowers team-b's quota, team-b divides anew
    write(tmp_path / "team-a" / "_queues.yaml", SUB.replace("NAME", "team-b/z"))
    write(
        tmp_path / "_queues.yaml",
        TOP.replace(
            "- name: team-b\n      nominalQuota: {cpu: 8}",
            "- name: team-b\n      nominalQuota: {cpu: 6}",
        ),
    )
    write(
        tmp_path / "team-b" / "_queues.yaml",
        SUB.replace("team-a/x", "team-b/p").replace("NAME", "team-b/r"),
    )
    loaded = files.load()
    assert loaded.config is not None and loaded.state is not None
    assert not loaded.state.valid and "team-a/_queues.yaml:8:13" in (loaded.state.error or "")
    queues = {q.name: q for q in loaded.config.spec.queues}
    assert queues["team-b"].nominal_quota.cpu == 6  # the top file's edit is in force
    assert "team-b/r" in queues and "team-b/q" not in queues  # and team-b's own
    assert "team-a/y" in queues  # team-a's last good text stands for its broken file
    # Fixed: valid again, with what the file now says.
    write(tmp_path / "team-a" / "_queues.yaml", SUB.replace("NAME", "team-a/w"))
    fixed = files.load()
    assert fixed.state is not None and fixed.state.valid
    assert fixed.config is not None and "team-a/w" in fixed.config.queue_names()
    assert "team-a/y" not in fixed.config.queue_names()


def test_a_teams_file_bad_from_the_start_leaves_its_tasks_in_its_queue(
    files: QueueFile, tmp_path: Path
) -> None:
    write(tmp_path / "team-a" / "_queues.yaml", SUB.replace("NAME", "team-b/z"))
    loaded = files.load()
    assert loaded.state is not None and not loaded.state.valid
    assert loaded.config is not None
    assert loaded.config.queue_names() == ["team-a", "team-b", "default"]
    assert loaded.config.queue_of("team-a/x/job") == "team-a"  # bounded by the top file
