"""Reading spec files given on the command line, as `apply -f` and `validate` do.

A file may hold several `---`-separated tasks; then each needs metadata.name. A file with one
task may leave the name out: it is the file's stem, as in the tasks folder.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reconciler.cli.common import CliError
from specs.models import Task
from specs.parse import MAX_FILE_BYTES, SpecParseError, parse_task, parse_tasks
from specs.store import SIDECAR_SUFFIXES

STDIN = "-"
SPEC_SUFFIXES = (".yaml", ".yml", ".json")
_SEVERAL = "expected one document, found several"


@dataclass(frozen=True)
class Source:
    """One file's bytes, and where its tasks go."""

    display: str  # the path as the user wrote it (plus the part below a folder): for messages
    data: bytes
    stem: str | None  # None for stdin: every document must name itself
    prefix: str = ""  # "team-a/" for a file in a subfolder of an applied folder


def read_sources(paths: Sequence[str], *, recursive: bool) -> list[Source]:
    """The files behind FILE|DIR|- arguments; a folder gives its spec files, sorted."""
    sources: list[Source] = []
    for arg in paths:
        if arg == STDIN:
            sources.append(Source("<stdin>", _read_stdin(), None))
            continue
        path = Path(arg)
        if path.is_dir():
            found = _spec_files(path, recursive)
            if not found:
                raise CliError(f"no spec files (*.yaml, *.yml, *.json) in {arg}")
            for file in found:
                rel = file.relative_to(path)
                prefix = "".join(f"{part}/" for part in rel.parent.parts)
                sources.append(Source(str(file), _read(file), file.stem, prefix))
        elif path.exists():
            sources.append(Source(arg, _read(path), path.stem))
        else:
            raise CliError(f'the path "{arg}" does not exist')
    return sources


def parse_source(source: Source) -> list[tuple[str, Task]]:
    """(task name, task) for each document; raises SpecParseError listing every problem."""
    if source.stem is not None:
        try:
            task = parse_task(
                source.data,
                file=source.display,
                expected_name=source.stem,
                task_name=source.prefix + source.stem,
            )
        except SpecParseError as exc:
            if not any(e.message == _SEVERAL for e in exc.errors):
                raise
        else:
            return [(source.prefix + (task.metadata.name or source.stem), task)]
    tasks = parse_tasks(source.data, file=source.display)
    return [(source.prefix + str(task.metadata.name), task) for task in tasks]


def _spec_files(directory: Path, recursive: bool) -> list[Path]:
    pattern = "**/*" if recursive else "*"
    files = []
    for path in directory.glob(pattern):
        rel = path.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts):
            continue  # hidden, like the store: .git, .rayqueue, editor temp files
        if path.name.endswith(SIDECAR_SUFFIXES) or not path.name.endswith(SPEC_SUFFIXES):
            continue
        if path.is_file():
            files.append(path)
    return sorted(files)


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            # One byte over the limit is enough for the parser to say "too large".
            return handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None


def _read_stdin() -> bytes:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is not None:
        return bytes(stream.read(MAX_FILE_BYTES + 1))
    return sys.stdin.read(MAX_FILE_BYTES + 1).encode()
