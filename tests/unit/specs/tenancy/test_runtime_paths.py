"""A spec's runtimeEnv local paths are read on the scheduler's own machine
(Ray zips a working_dir and uploads it), so once confined they must resolve, symlinks and all,
under the roots of whoever may write the spec, and never reach rayqueue's own files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from reconciler.app.assembly import build_reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import SUCCEEDED, Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from specs.tenancy.access import (
    AccessError,
    Principal,
    Role,
    Tokens,
    load_tokens,
    parse_tokens_file,
)
from specs.tenancy.runtimepaths import Confinement, RuntimePaths, local_values, unconfined_warning
from specs.yamlio.parse import SpecParseError, parse_task

SHA = "0" * 64


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A code root with a project in it, the tasks folder, and a secret beside them."""
    root = tmp_path / "code" / "team-a"
    (root / "proj").mkdir(parents=True)
    (root / "proj" / "main.py").write_text("print('hi')\n")
    (root / "requirements.txt").write_text("requests\n")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    secret = tmp_path / "etc" / "rayqueue"
    secret.mkdir(parents=True)
    (secret / "tokens.yaml").write_text("tokens: []\n")
    return {"root": root, "tasks": tasks, "secret": secret, "tmp": tmp_path}


def confined(layout: dict[str, Path], **settings: object) -> Confinement:
    fields: dict[str, object] = {"tasks_dir": layout["tasks"]} | settings
    return Confinement.from_settings(Settings(**fields), cwd=str(layout["tmp"]))  # type: ignore[arg-type]


def problems(c: Confinement, env: dict[str, object], roots: list[Path]) -> list[str]:
    return [str(p) for p in c.check(env, [str(r) for r in roots])]


# --- which fields name local paths --------------------------------------------------------


def test_local_values_follow_ray_semantics() -> None:
    env = {
        "working_dir": "proj",
        "py_modules": ["mod", "s3://b/m.zip"],
        "java_jars": ["lib.jar"],
        "pip": "requirements.txt",
        "uv": ["requests"],  # package names, not a file
        "conda": "my-env",  # an env name, not a file
        "excludes": ["/etc/*"],  # patterns, never read
        "env_vars": {"X": "/etc/passwd"},
    }
    found = {loc: value for loc, value, _ in local_values(env)}
    assert found == {
        ("working_dir",): "proj",
        ("py_modules", 0): "mod",
        ("py_modules", 1): "s3://b/m.zip",
        ("java_jars", 0): "lib.jar",
        ("pip",): "requirements.txt",
    }
    dicts = {"pip": {"packages": "reqs.txt"}, "uv": "u.txt", "conda": "env.yml"}
    assert {loc for loc, _, _ in local_values(dicts)} == {
        ("pip", "packages"),
        ("uv",),
        ("conda",),
    }
    assert [v for _, v, _ in local_values({"conda": "/opt/envs/x"})] == ["/opt/envs/x"]
    assert list(local_values({"pip": {"packages": ["a"]}, "conda": {"dependencies": []}})) == []


# --- the check ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    [
        "https://example.com/code.zip",
        "http://example.com/code.zip",
        "s3://bucket/code.zip",
        "gs://bucket/code.zip",
        "gcs://_ray_pkg_abc.zip",
        "HTTPS://example.com/code.zip",
    ],
)
def test_remote_uris_are_always_fine(layout: dict[str, Path], uri: str) -> None:
    c = confined(layout)
    assert problems(c, {"working_dir": uri, "py_modules": [uri]}, []) == []


def test_a_path_under_the_root_is_fine(layout: dict[str, Path]) -> None:
    c = confined(layout)
    root = layout["root"]
    env = {
        "working_dir": str(root / "proj"),
        "py_modules": [str(root / "proj")],
        "pip": str(root / "requirements.txt"),
    }
    assert problems(c, env, [root]) == []


def test_a_path_outside_the_roots_is_refused_naming_field_and_roots(
    layout: dict[str, Path],
) -> None:
    c = confined(layout)
    secret = str(layout["secret"])
    found = c.check({"working_dir": secret}, [str(layout["root"])])
    assert [p.forbidden for p in found] == [True]
    assert str(found[0]) == (
        f"spec.runtimeEnv.working_dir: {secret} is outside the allowed roots ({layout['root']})"
    )


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"py_modules": ["{root}/proj", "{secret}"]}, "spec.runtimeEnv.py_modules[1]"),
        ({"pip": "{secret}/tokens.yaml"}, "spec.runtimeEnv.pip"),
        ({"pip": {"packages": "{secret}/tokens.yaml"}}, "spec.runtimeEnv.pip.packages"),
        ({"uv": "{secret}/tokens.yaml"}, "spec.runtimeEnv.uv"),
        ({"conda": "{secret}/tokens.yaml"}, "spec.runtimeEnv.conda"),
        ({"java_jars": ["{secret}"]}, "spec.runtimeEnv.java_jars[0]"),
    ],
)
def test_every_field_ray_reads_locally_is_confined(
    layout: dict[str, Path], env: dict[str, object], field: str
) -> None:
    text = yaml.safe_dump(env).replace("{root}", str(layout["root"]))
    text = text.replace("{secret}", str(layout["secret"]))
    found = problems(confined(layout), yaml.safe_load(text), [layout["root"]])
    assert len(found) == 1 and found[0].startswith(field + ": "), found


def test_file_and_local_uris_are_local_paths(layout: dict[str, Path]) -> None:
    c = confined(layout)
    root, secret = layout["root"], layout["secret"]
    assert problems(c, {"working_dir": f"file://{secret}"}, [root]) != []
    assert problems(c, {"working_dir": f"local://{secret}"}, [root]) != []
    assert problems(c, {"working_dir": f"file://{root}/proj"}, [root]) == []


def test_a_relative_path_resolves_against_the_working_directory(layout: dict[str, Path]) -> None:
    c = confined(layout)  # cwd: tmp, which holds code/ and etc/
    assert problems(c, {"working_dir": "code/team-a/proj"}, [layout["root"]]) == []
    assert problems(c, {"working_dir": "etc/rayqueue"}, [layout["root"]]) != []


def test_dot_dot_cannot_climb_out_of_a_root(layout: dict[str, Path]) -> None:
    c = confined(layout)
    sneaky = f"{layout['root']}/proj/../../../etc/rayqueue"
    assert problems(c, {"working_dir": sneaky}, [layout["root"]]) != []


def test_a_symlink_out_of_a_root_is_refused(layout: dict[str, Path]) -> None:
    root = layout["root"]
    (root / "innocent").symlink_to(layout["secret"])
    found = problems(confined(layout), {"working_dir": str(root / "innocent")}, [root])
    assert len(found) == 1 and f"resolves to {layout['secret']}" in found[0]


def test_a_symlink_inside_the_shipped_folder_is_refused(layout: dict[str, Path]) -> None:
    """Ray zips a folder following the links in it: one to the secrets ships the secrets."""
    root = layout["root"]
    (root / "proj" / "conf").symlink_to(layout["secret"])
    found = problems(confined(layout), {"working_dir": str(root / "proj")}, [root])
    assert len(found) == 1 and "the symlink conf in it leads to" in found[0]
    os.unlink(root / "proj" / "conf")
    (root / "proj" / "shared").symlink_to(root / "requirements.txt")  # within the root: fine
    assert problems(confined(layout), {"working_dir": str(root / "proj")}, [root]) == []


def test_a_symlinked_root_is_followed(layout: dict[str, Path]) -> None:
    link = layout["tmp"] / "current"
    link.symlink_to(layout["root"])
    c = confined(layout)
    assert problems(c, {"working_dir": str(layout["root"] / "proj")}, [link]) == []
    assert problems(c, {"working_dir": str(link / "proj")}, [link]) == []


def test_slash_is_never_accepted_even_as_a_root(layout: dict[str, Path]) -> None:
    found = problems(confined(layout), {"working_dir": "/"}, [Path("/")])
    assert len(found) == 1 and "holds the tasks folder" in found[0]


def test_the_tasks_state_and_status_folders_and_token_files_are_never_accepted(
    layout: dict[str, Path],
) -> None:
    tmp = layout["tmp"]
    token = tmp / "token"
    token.write_text("x" * 40)
    c = confined(
        layout,
        status_dir=tmp / "status",
        state_dir=tmp / "state",
        token_file=token,
        team_tokens=layout["secret"] / "tokens.yaml",
        queues_path=tmp / "queues.yaml",
    )
    everything = [tmp]  # a root that holds them all
    for path, rule in [
        (layout["tasks"], "is the tasks folder"),
        (layout["tasks"] / "team-b", "lies in the tasks folder"),
        (tmp / "status", "is the status folder"),
        (tmp / "state" / "lock", "lies in the state folder"),
        (token, "is the token file"),
        (layout["secret"], "holds the team tokens file"),
        (tmp / "queues.yaml", "is the queue configuration"),
        (tmp, "holds the tasks folder"),
    ]:
        found = problems(c, {"working_dir": str(path)}, everything)
        assert len(found) == 1 and rule in found[0], (path, found)
    # The default state folder is <tasks>/.rayqueue.
    assert Confinement.from_settings(Settings(tasks_dir=layout["tasks"])).guarded_dirs[-1] == (
        "the state folder",
        str(layout["tasks"] / ".rayqueue"),
    )


def test_malformed_values_are_not_forbidden_but_refused(layout: dict[str, Path]) -> None:
    c = confined(layout)
    found = c.check({"working_dir": 5, "py_modules": "notalist", "java_jars": ["ftp://x/y"]}, [])
    assert [(p.field, p.forbidden) for p in found] == [
        ("spec.runtimeEnv.working_dir", False),
        ("spec.runtimeEnv.py_modules", False),
        ("spec.runtimeEnv.java_jars[0]", False),
    ]


def test_a_folder_too_big_to_check_is_refused(
    layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("specs.tenancy.runtimepaths.MAX_TREE_ENTRIES", 3)
    proj = layout["root"] / "proj"
    for index in range(3):
        (proj / f"f{index}.py").write_text("")
    found = problems(confined(layout), {"working_dir": str(proj)}, [layout["root"]])
    assert len(found) == 1 and "holds more than 3 files and folders" in found[0]


def test_serve_warns_only_when_nothing_is_confined(tmp_path: Path) -> None:
    warning = unconfined_warning(Settings(tasks_dir=tmp_path), Tokens())
    assert warning is not None
    assert "read from THIS machine" in warning and "--working-dir-root" in warning
    rooted = Settings(tasks_dir=tmp_path, working_dir_roots=("/srv",))
    assert unconfined_warning(rooted, Tokens()) is None


def test_no_roots_means_no_local_path(layout: dict[str, Path]) -> None:
    found = problems(confined(layout), {"working_dir": str(layout["root"])}, [])
    assert len(found) == 1 and "no root allows local paths" in found[0]


# --- which roots apply, and when confinement is on ------------------------------------------


def tokens_file(tmp: Path, entries: list[dict[str, object]]) -> Path:
    path = tmp / "team-tokens.yaml"
    path.write_text(yaml.safe_dump({"tokens": entries}))
    path.chmod(0o600)
    return path


def test_working_dir_roots_in_the_tokens_file(tmp_path: Path) -> None:
    entries = [
        {"name": "a", "sha256": SHA, "role": "write", "folders": ["team-a"],
         "workingDirRoots": ["/srv/code/team-a"]},
    ]  # fmt: skip
    (entry,) = parse_tokens_file(yaml.safe_dump({"tokens": entries}).encode(), "t.yaml")
    assert entry.principal.working_dir_roots == ("/srv/code/team-a",)
    for bad in (["relative/path"], "/srv/code", [5]):
        entries[0]["workingDirRoots"] = bad
        with pytest.raises(AccessError, match=r"t\.yaml: tokens\[0\] \(a\): workingDirRoots"):
            parse_tokens_file(yaml.safe_dump({"tokens": entries}).encode(), "t.yaml")


def test_working_dir_root_must_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--working-dir-root: 'code' must be an absolute path"):
        Settings(tasks_dir=tmp_path, working_dir_roots=("code",))


def test_confinement_is_off_only_without_team_tokens_and_roots(tmp_path: Path) -> None:
    assert not RuntimePaths.from_settings(Settings(tasks_dir=tmp_path), Tokens()).enabled
    single = Settings(tasks_dir=tmp_path, api_token="t0k3n-0123456789abcdef-0123456789")
    assert not RuntimePaths.from_settings(single, load_tokens(single, {})).enabled
    rooted = Settings(tasks_dir=tmp_path, working_dir_roots=("/srv",))
    assert RuntimePaths.from_settings(rooted, Tokens()).enabled
    teams = Settings(tasks_dir=tmp_path, team_tokens=tokens_file(tmp_path, []))
    assert RuntimePaths.from_settings(teams, load_tokens(teams, {})).enabled


def test_roots_of_a_task_are_the_global_ones_and_those_of_its_writers(tmp_path: Path) -> None:
    a = Principal("a", Role.WRITE, ("team-a",), working_dir_roots=("/srv/a",))
    b = Principal("b", Role.WRITE, ("team-b",), working_dir_roots=("/srv/b",))
    paths = RuntimePaths(Confinement((), (), "/"), ("/srv/shared",), (a, b))
    assert paths.roots_for_task("team-a/x") == ("/srv/shared", "/srv/a")
    assert paths.roots_for_task("other") == ("/srv/shared",)
    assert paths.roots_for_writer(b) == ("/srv/shared", "/srv/b")


# --- a spec file in the folder: Invalid, pinned on its line, never submitted -------------


SPEC = """\
apiVersion: rayqueue/v1
kind: Task
spec:
  entrypoint: python main.py
  runtimeEnv:
    working_dir: {path}
  resources: {{cpu: 1}}
"""


def test_the_parse_error_names_file_field_and_line(layout: dict[str, Path]) -> None:
    paths = RuntimePaths(confined(layout), (str(layout["root"]),))
    check = paths.store_check()
    assert check is not None
    text = SPEC.format(path=layout["secret"])
    with pytest.raises(SpecParseError) as caught:
        parse_task(text, file="x.yaml", task_name="x", check=lambda t: check("x", t))
    assert str(caught.value) == (
        f"x.yaml:6:18: spec.runtimeEnv.working_dir: {layout['secret']} is outside the "
        f"allowed roots ({layout['root']})"
    )


def test_a_dropped_in_spec_outside_the_roots_is_invalid_and_never_submitted(
    layout: dict[str, Path],
) -> None:
    tasks = layout["tasks"]
    settings = Settings(
        tasks_dir=tasks,
        working_dir_roots=(str(layout["root"]),),
        queue_id="q",
        api=False,
        settle_seconds=0,
    )
    ray = FakeRay(Capacity(4, 0, 2**34))
    reconciler = build_reconciler(settings, ray, tokens=Tokens())
    (tasks / "bad.yaml").write_text(SPEC.format(path=layout["secret"]))
    (tasks / "good.yaml").write_text(SPEC.format(path=layout["root"] / "proj"))
    reconciler.run_pass()
    reconciler.run_pass()
    status = yaml.safe_load((tasks / "bad.status.yaml").read_text())["status"]
    assert status["phase"] == "Invalid"
    assert "bad.yaml:6:18: spec.runtimeEnv.working_dir" in status["message"]
    assert "outside the allowed roots" in status["message"]
    submitted = [r.runtime_env for r in ray.submitted]
    run = {"RAYQUEUE_RUN": "1"}  # every run is told its number
    assert submitted == [{"working_dir": str(layout["root"] / "proj"), "env_vars": run}]


def test_a_path_that_turns_into_a_symlink_is_refused_at_submission(
    layout: dict[str, Path],
) -> None:
    """The spec was fine when read; by the time Ray would zip it, its folder leads to the
    secrets. The loop checks again right before submitting: the run fails, nothing ships."""
    tasks, root = layout["tasks"], layout["root"]
    settings = Settings(
        tasks_dir=tasks, working_dir_roots=(str(root),), queue_id="q", api=False, settle_seconds=0
    )
    ray = FakeRay(Capacity(1, 0, 2**34))
    reconciler = build_reconciler(settings, ray, tokens=Tokens())
    (tasks / "blocker.yaml").write_text(SPEC.format(path=root / "proj"))
    reconciler.run_pass()
    (blocker,) = ray.submitted
    (root / "later").mkdir()
    (tasks / "t.yaml").write_text(SPEC.format(path=root / "later"))
    reconciler.run_pass()
    assert yaml.safe_load((tasks / "t.status.yaml").read_text())["status"]["phase"] == "Queued"
    (root / "later").rmdir()
    (root / "later").symlink_to(layout["secret"])
    ray.set_status(blocker.submission_id, SUCCEEDED)
    reconciler.run_pass()
    reconciler.run_pass()
    status = yaml.safe_load((tasks / "t.status.yaml").read_text())["status"]
    assert [r.submission_id for r in ray.submitted] == [blocker.submission_id]
    assert (status["phase"], status["reason"]) == ("Failed", "SubmitFailed"), status
    assert "outside the allowed roots" in status["message"]
    assert "nothing was sent" in status["message"]


def test_a_spec_in_a_team_folder_gets_its_writers_roots(layout: dict[str, Path]) -> None:
    tmp, tasks, root = layout["tmp"], layout["tasks"], layout["root"]
    entries = [
        {"name": "a", "sha256": SHA, "role": "write", "folders": ["team-a"],
         "workingDirRoots": [str(root)]},
    ]  # fmt: skip
    settings = Settings(tasks_dir=tasks, team_tokens=tokens_file(tmp, entries))
    paths = RuntimePaths.from_settings(settings, load_tokens(settings, {}), cwd=str(tmp))
    store = TaskStore(tasks, check=paths.store_check())
    for team in ("team-a", "team-b"):
        (tasks / team).mkdir()
        (tasks / team / "t.yaml").write_text(SPEC.format(path=root / "proj"))
    entries_found = store.scan()
    assert entries_found["team-a/t"].task is not None
    error = entries_found["team-b/t"].error
    assert error is not None and "no root allows local paths" in error.message
