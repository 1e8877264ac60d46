"""Reading spec files given on the command line, as `apply -f` and `validate` do.

A file may hold several `---`-separated tasks; then each needs metadata.name. A file with one
task may leave the name out: it is the file's stem, as in the tasks folder.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reconciler.cli.common import CliError, max_array_elements
from specs.folder.store import SIDECAR_SUFFIXES
from specs.task.records import Task
from specs.yamlio.parse import MAX_FILE_BYTES, SpecParseError, dump_task, parse_task, parse_tasks

STDIN = "-"
SPEC_SUFFIXES = (".yaml", ".yml", ".json")
_SEVERAL = "expected one document, found several"
# A line that starts or ends a YAML document. At column 0 it cannot belong to any scalar (a
# block scalar ends there, a quoted one may not hold it), so cutting the text at these lines
# cuts it between documents.
_MARKER = re.compile(r"(?:---|\.\.\.)(?:[ \t]|$)")


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
    limit = max_array_elements()
    if source.stem is not None:
        try:
            task = parse_task(
                source.data,
                file=source.display,
                expected_name=source.stem,
                task_name=source.prefix + source.stem,
                max_array_elements=limit,
            )
        except SpecParseError as exc:
            if not any(e.message == _SEVERAL for e in exc.errors):
                raise
        else:
            return [(source.prefix + (task.metadata.name or source.stem), task)]
    tasks = parse_tasks(source.data, file=source.display, max_array_elements=limit)
    return [(source.prefix + str(task.metadata.name), task) for task in tasks]


@dataclass(frozen=True)
class Document:
    """One task of a source: its name, what it means, and its own text to write."""

    name: str
    task: Task
    data: bytes


def documents(source: Source) -> list[Document]:
    """parse_source, with each task's own text: the whole file for a file with one task; for
    several, the file cut at its `---` lines, comments and order kept. Should a cut not give
    back the very tasks the file holds (an odd layout), each is written as normalized YAML."""
    items = parse_source(source)
    if len(items) == 1 and source.stem is not None:
        name, task = items[0]
        return [Document(name, task, source.data)]
    pieces = _pieces(source.data.decode("utf-8-sig")) if len(items) > 1 else []
    result = []
    for index, (name, task) in enumerate(items):
        data = pieces[index].encode() if len(pieces) == len(items) else b""
        if not data or not _same_task(data, name, task):
            data = dump_task(task).encode()
        result.append(Document(name, task, data))
    return result


def _pieces(text: str) -> list[str]:
    """The documents of a stream as text; a marker line begins the document it introduces,
    and comments between documents stay with the one before (or the first)."""
    pieces: list[str] = []
    current: list[str] = []
    content = False
    for line in text.splitlines(keepends=True):
        if line.startswith("---") and _MARKER.match(line):
            if content:
                pieces.append("".join(current))
                current, content = [], False
            else:  # an empty document so far: keep its comments, not its marker
                current = [c for c in current if not _MARKER.match(c)]
        elif not _MARKER.match(line) and line.strip() and not line.lstrip().startswith("#"):
            content = True
        current.append(line)
    if content:
        pieces.append("".join(current))
    elif pieces:
        pieces[-1] += "".join(c for c in current if not _MARKER.match(c))  # a stray last "---"
    return pieces


def _same_task(data: bytes, name: str, task: Task) -> bool:
    stem = name.rsplit("/", 1)[-1]
    try:
        alone = parse_task(
            data,
            file=name,
            expected_name=stem,
            task_name=name,
            max_array_elements=max_array_elements(),
        )
    except SpecParseError:
        return False
    return alone == task


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
