"""`rayqueue validate`: exit 0 or 1, errors as file:line:column: field: message."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import spec_text, write


def test_valid_files(rq, tmp_path: Path) -> None:
    a = write(tmp_path, "a", spec_text())
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(
        spec_text().replace("kind: Task", "kind: Task\nmetadata: {name: x}")
        + "---\n"
        + spec_text().replace("kind: Task", "kind: Task\nmetadata: {name: y}")
    )
    result = rq("validate", str(a), str(bundle), folder=None)
    assert result.code == 0
    assert result.out == f"{a}: ok (task/a)\n{bundle}: ok (task/x, task/y)\n"
    assert rq("validate", "-q", str(a), folder=None).out == ""


def test_errors_have_file_line_column_field(rq, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: echo\n"
        "  priority: 12\n  resources: {cpu: 1}\n  priorty: 3\n"
    )
    good = write(tmp_path, "good", spec_text())
    result = rq("validate", str(bad), str(good), folder=None)
    assert result.code == 1
    errors = result.err.splitlines()
    assert f"{bad}:5:13: spec.priority: must be less than or equal to 9 (got 12)" in errors
    assert f"{bad}:7:3: spec.priorty: unknown field" in errors
    assert f"{good}: ok (task/good)" in result.out


def test_yaml_syntax_error(rq, tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("apiVersion: rayqueue/v1\nkind: Task\nspec: [\n")
    result = rq("validate", str(bad), folder=None)
    assert result.code == 1
    assert result.err.startswith(f"{bad}:4:1: ")


def test_name_must_match_the_file(rq, tmp_path: Path) -> None:
    path = write(
        tmp_path, "train", spec_text().replace("kind: Task", "kind: Task\nmetadata:\n  name: other")
    )
    result = rq("validate", str(path), folder=None)
    assert result.code == 1
    assert f"{path}:4:9: metadata.name:" in result.err


def test_folder_is_checked_as_the_reconciler_reads_it(rq, tmp_path: Path) -> None:
    folder = tmp_path / "tasks"
    write(folder, "ok", spec_text())
    write(folder, "team/nested", spec_text())
    (folder / "bundle.yaml").write_text(
        spec_text().replace("kind: Task", "kind: Task\nmetadata: {name: x}") + "---\n" + spec_text()
    )
    (folder / "ok.status.yaml").write_text("ignored: true\n")
    (folder / "notes.txt").write_text("ignored")
    (folder / "both.yaml").write_text(spec_text())
    (folder / "both.yml").write_text(spec_text())
    result = rq("validate", str(folder), folder=None)
    assert result.code == 1
    # A tasks folder holds one task per file: a bundle is invalid there.
    assert f"{folder}/bundle.yaml:" in result.err and "expected one document" in result.err
    assert "both both.yaml and both.yml define task both" in result.err
    assert f"{folder}/ok.yaml: ok (task/ok)" in result.out
    assert f"{folder}/team/nested.yaml: ok (task/team/nested)" in result.out


def test_stdin(rq, monkeypatch: pytest.MonkeyPatch) -> None:
    text = spec_text().replace("kind: Task", "kind: Task\nmetadata: {name: s}")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert rq("validate", "-", folder=None).out == "<stdin>: ok (task/s)\n"


def test_missing_path_and_empty_folder(rq, tmp_path: Path) -> None:
    result = rq("validate", str(tmp_path / "nope.yaml"), folder=None)
    assert result.code == 1 and "does not exist" in result.err
    (tmp_path / "empty").mkdir()
    result = rq("validate", str(tmp_path / "empty"), folder=None)
    assert result.code == 1 and "no task specs" in result.err


def test_needs_a_path(rq) -> None:
    assert rq("validate", folder=None).code == 2


QUEUES = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 4}
  default: {}
"""


def test_queue_configuration_is_checked(rq, tmp_path: Path) -> None:
    folder = tmp_path / "checked"
    folder.mkdir()
    write(folder, "a", spec_text())
    config = folder / "_queues.yaml"
    config.write_text(QUEUES)
    ok = rq("validate", str(folder), folder=None)
    assert ok.code == 0, ok.err
    assert f"{config}: ok (queues team-a, default)" in ok.out
    assert rq("validate", str(config), folder=None).code == 0

    config.write_text(QUEUES.replace("cpu: 4", "cpu: -4"))
    for target in (folder, config):
        bad = rq("validate", str(target), folder=None)
        assert bad.code == 1
        assert f"{config}:6:27: spec.queues[0].nominalQuota.cpu: must be greater" in bad.err


def test_a_queue_config_under_any_name_is_checked_with_the_errors_serve_gives(
    rq, tmp_path: Path
) -> None:
    from specs.queues.parse import parse_queue_config
    from specs.yamlio.parse import SpecParseError

    config = tmp_path / "queues.yaml"  # as given to serve --queues
    config.write_text(QUEUES)
    ok = rq("validate", str(config), folder=None)
    assert ok.code == 0 and "ok (queues team-a, default)" in ok.out
    bad_text = QUEUES + "  fairSharing:\n    usageHalfLife: 0h\n"
    config.write_text(bad_text)
    bad = rq("validate", str(config), folder=None)
    assert bad.code == 1
    with pytest.raises(SpecParseError) as served:  # what serve logs and writes to the status
        parse_queue_config(bad_text, file=str(config))
    assert bad.err.strip() == str(served.value).strip()
    assert "spec.fairSharing.usageHalfLife: must be greater than 0" in bad.err


def test_a_folder_is_checked_against_working_dir_roots(rq, tmp_path: Path) -> None:
    """CI can refuse a spec whose runtimeEnv would ship a folder from outside the
    roots, and a symlink from one team folder into another, before serve ever reads it."""
    root = tmp_path / "code"
    (root / "proj").mkdir(parents=True)
    folder = tmp_path / "tasks"
    write(folder, "team-a/ok", spec_text(runtimeEnv={"working_dir": str(root / "proj")}))
    write(folder, "team-a/bad", spec_text(runtimeEnv={"working_dir": str(tmp_path)}))
    (folder / "team-b").mkdir()
    (folder / "team-b" / "link.yaml").symlink_to("../team-a/ok.yaml")
    plain = rq("validate", str(folder), folder=None)  # the link alone fails it
    assert plain.code == 1 and plain.err.count("\n") == 1
    assert "from team-b/ into team-a/" in plain.err
    result = rq("validate", "--working-dir-root", str(root), str(folder), folder=None)
    assert result.code == 1
    assert f"{folder}/team-a/ok.yaml: ok" in result.out
    assert f"spec.runtimeEnv.working_dir: {tmp_path} holds the tasks folder" in result.err
    assert "from team-b/ into team-a/" in result.err
    relative = rq("validate", "--working-dir-root", "code", str(folder), folder=None)
    assert relative.code == 2 and "must be an absolute path" in relative.err
