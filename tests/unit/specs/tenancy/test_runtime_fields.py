"""Every runtimeEnv field that can name a local file, each value normalised as Ray resolves
it before it is checked: a trailing `/`, `/.` or `//`, a `..` after a symlink, relative paths,
`file://` and `local://` URIs. The table is held to Ray's own list of fields, and Ray's parsers
to the reading the check assumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from specs.settings.process import Settings
from specs.tenancy.runtimepaths import (
    LOCAL_FIELDS,
    NO_LOCAL_PATH,
    Confinement,
    Shape,
    is_conda_path,
    local_values,
)


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """code/ (the allowed root) with a project, a requirements file and a conda file in it;
    tasks/ (the tasks folder) with another team's files; a link from code/ into tasks/."""
    root = tmp_path / "code"
    (root / "proj").mkdir(parents=True)
    (root / "proj" / "main.py").write_text("print('hi')\n")
    (root / "req.txt").write_text("requests\n")
    (root / "env.yaml").write_text("dependencies: [numpy]\n")
    secret = tmp_path / "tasks" / "team-b"
    (secret / "sub").mkdir(parents=True)
    for name in ("secret.yaml", "secret.yml", "secret.txt", "secret.whl"):
        (secret / name).write_text("dependencies: [s3cr3t]\n")
    (root / "inner").symlink_to(secret / "sub", target_is_directory=True)
    return {"tmp": tmp_path, "root": root, "secret": secret}


def confined(layout: dict[str, Path]) -> Confinement:
    settings = Settings(tasks_dir=layout["tmp"] / "tasks")
    return Confinement.from_settings(settings, cwd=str(layout["tmp"]))


def refused(layout: dict[str, Path], env: dict[str, object]) -> list[str]:
    return [p.field for p in confined(layout).check(env, [str(layout["root"])])]


def test_the_table_covers_every_field_ray_knows() -> None:
    """A Ray upgrade that adds a field fails here until the table says whether it is read."""
    runtime_env = pytest.importorskip("ray.runtime_env.runtime_env")
    known = runtime_env.RuntimeEnv.known_fields
    assert set(LOCAL_FIELDS) | set(NO_LOCAL_PATH) == known
    assert not set(LOCAL_FIELDS) & set(NO_LOCAL_PATH)


# The disguises of one path, each the same file or folder to Ray (and to the system).
DISGUISES = ["{p}", "{p}/", "{p}/.", "{p}//", "{p}/./", "code/inner/../{name}"]

# (field, how a value is placed in it, the file or folder it reads in tasks/team-b/)
FIELDS = [
    ("working_dir", lambda v: v, "sub"),
    ("py_modules", lambda v: [v], "sub"),
    ("java_jars", lambda v: [v], "sub"),
    ("pip", lambda v: v, "secret.txt"),
    ("pip", lambda v: {"packages": v}, "secret.txt"),
    ("uv", lambda v: v, "secret.txt"),
    ("conda", lambda v: v, "secret.yaml"),
    ("conda", lambda v: v, "secret.yml"),
]


@pytest.mark.parametrize("disguise", DISGUISES)
@pytest.mark.parametrize(("field", "place", "name"), FIELDS)
def test_each_field_is_refused_in_every_disguise(
    layout: dict[str, Path], field: str, place: object, name: str, disguise: str
) -> None:
    relative = f"tasks/team-b/{name}"
    value = disguise.format(p=relative, name=name)
    assert callable(place)
    found = refused(layout, {field: place(value)})
    assert len(found) == 1 and found[0].startswith(f"spec.runtimeEnv.{field}"), (value, found)
    absolute = disguise.format(p=str(layout["tmp"] / relative), name=name)
    assert refused(layout, {field: place(absolute)}), absolute


@pytest.mark.parametrize(("field", "place", "name"), FIELDS)
def test_each_field_still_takes_a_path_under_the_root(
    layout: dict[str, Path], field: str, place: object, name: str
) -> None:
    own = {"sub": "code/proj", "secret.txt": "code/req.txt"}.get(name, "code/env.yaml")
    assert callable(place)
    for value in (own, own + "/", f"{layout['tmp']}/{own}/."):
        assert refused(layout, {field: place(value)}) == [], value


def test_a_dotdot_after_a_link_is_resolved_after_the_link(layout: dict[str, Path]) -> None:
    """code/inner leads to tasks/team-b/sub: `code/inner/../secret.txt` is team-b's file,
    although the string, read without the link, stays under code/."""
    found = confined(layout).check({"pip": "code/inner/../secret.txt"}, [str(layout["root"])])
    assert [p.field for p in found] == ["spec.runtimeEnv.pip"]
    assert "lies in the tasks folder" in found[0].message


@pytest.mark.parametrize(
    "uri",
    [
        "file://{tasks}/team-b/secret.whl",
        "file://{tasks}/team-b/%73ecret.whl",  # percent-decoded on the node
        "FILE://{tasks}/team-b/secret.whl",
        "local://{tasks}/team-b/sub",
        "local://{root}/proj#/../../../tasks/team-b/sub",  # no fragment: the path is whole
        "local://{root}/proj?x=/../../../tasks/team-b/sub",
    ],
)
def test_node_uris_are_the_path_the_node_opens(layout: dict[str, Path], uri: str) -> None:
    (layout["root"] / "proj#").mkdir()
    (layout["root"] / "proj?x=").mkdir()
    value = uri.format(tasks=layout["tmp"] / "tasks", root=layout["root"])
    assert refused(layout, {"working_dir": value}) == ["spec.runtimeEnv.working_dir"]


@pytest.mark.parametrize("uri", ["file://code/proj", "local://code/proj", "file:/etc/passwd"])
def test_a_node_uri_without_an_absolute_path_is_refused(layout: dict[str, Path], uri: str) -> None:
    """Relative to a folder on the node this process cannot know."""
    found = confined(layout).check({"working_dir": uri}, [str(layout["root"])])
    assert [(p.field, p.forbidden) for p in found] == [("spec.runtimeEnv.working_dir", True)]
    assert "cannot be checked" in found[0].message


@pytest.mark.parametrize(
    "uri", ["https://h/code.zip", "s3://b/code.zip", "gs://b/c.zip", "gcs://_ray_pkg_a.zip"]
)
def test_remote_uris_read_nothing_here(layout: dict[str, Path], uri: str) -> None:
    assert refused(layout, {"working_dir": uri, "py_modules": [uri]}) == []


def test_a_tilde_is_a_folder_name_as_ray_reads_it(layout: dict[str, Path]) -> None:
    """Ray never expands `~`: `~/x` is the folder `~` under the working directory."""
    (layout["root"] / "~").mkdir()
    (layout["root"] / "~" / "req.txt").write_text("requests\n")
    found = Confinement.from_settings(
        Settings(tasks_dir=layout["tmp"] / "tasks"), cwd=str(layout["root"])
    ).check({"pip": "~/req.txt"}, [str(layout["root"])])
    assert found == []


def test_a_loop_of_links_is_refused(layout: dict[str, Path]) -> None:
    (layout["root"] / "loop").symlink_to("loop")
    found = refused(layout, {"pip": "code/loop/req.txt"})
    assert found == ["spec.runtimeEnv.pip"]


@pytest.mark.parametrize(
    ("conda", "path"),
    [
        ("env.yaml", True),
        ("env.yaml/", True),
        ("env.yaml/.", True),
        ("env.yml//", True),
        ("/opt/envs/x", True),
        ("my-env", False),
        ("env.YAML", False),  # Ray's suffix test is exact: an env name
        ("env.yaml/..", False),
    ],
)
def test_a_conda_string_is_a_path_exactly_when_ray_reads_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conda: str, path: bool
) -> None:
    assert is_conda_path(conda) is path
    assert bool(list(local_values({"conda": conda}))) is path
    validation = pytest.importorskip("ray._private.runtime_env.validation")
    monkeypatch.chdir(tmp_path)
    if path and not conda.startswith("/"):
        (tmp_path / "env.yaml").write_text("dependencies: [a]\n")
        (tmp_path / "env.yml").write_text("dependencies: [a]\n")
        assert validation.parse_and_validate_conda(conda) == {"dependencies": ["a"]}
    elif not path:
        assert validation.parse_and_validate_conda(conda) == conda  # a name, nothing read


@pytest.mark.parametrize("requirements", ["req.txt/", "req.txt/.", "./req.txt"])
def test_ray_reads_a_requirements_file_in_every_disguise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, requirements: str
) -> None:
    """Why pip and uv strings are checked as the path they resolve to, whatever their shape."""
    validation = pytest.importorskip("ray._private.runtime_env.validation")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "req.txt").write_text("s3cr3t\n")
    assert validation.parse_and_validate_pip(requirements)["packages"] == ["s3cr3t"]
    assert validation.parse_and_validate_uv(requirements)["packages"] == ["s3cr3t"]


def test_every_shape_has_a_field() -> None:
    assert set(LOCAL_FIELDS.values()) == set(Shape)
