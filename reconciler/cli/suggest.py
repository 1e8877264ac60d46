"""`rayqueue suggest TASK` (or `--all`): the `resources:` block the task's ended runs
suggest, printed as a unified diff of its spec file; the file is never written."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from reconciler.cli.common import (
    EXIT_OK,
    CliError,
    HelpFormatter,
    Subparsers,
    folder_parent,
    load_views,
    open_service,
    tasks_dir,
)
from reconciler.shell.ops.rightsize import RunRecord, Suggestion, families, suggest
from reconciler.shell.ops.runhistory import FILE_NAME, read_records
from specs.cluster import Capacity
from specs.service.views import TaskView
from specs.task.arrays import split
from specs.yamlio.mergepatch import load_document, merge_patch, patch_text

EPILOG = f"""\
The runs are read from {FILE_NAME} in serve's state folder (--state-dir, default
<dir>/.rayqueue), where serve records each ended run's use as its censuses saw it. A task's
suggestion needs at least one run that is not a lower bound, seen by 3 censuses in all; an
array's elements suggest together. CPUs: the peak held in Ray, or the most cores a run kept
busy on average, rounded up; GPUs: the peak held; memory: the peak resident memory x 1.2,
rounded up (256Mi steps below 4Gi, whole Gi above). The diff is printed, never applied.

examples:
  rayqueue suggest team-a/train
  rayqueue suggest --all > resize.patch && git apply resize.patch
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "suggest",
        parents=[folder_parent()],
        formatter_class=HelpFormatter,
        help="suggest resources from what past runs held and used, as a diff of the spec",
        description="Print, as a unified diff of the spec file, the resources: block that the "
        "task's ended runs suggest. Nothing is written.",
        epilog=EPILOG,
    )
    p.add_argument("name", metavar="TASK", nargs="?", help="the task or array, e.g. team-a/train")
    p.add_argument("--all", action="store_true", help="every task and array with a suggestion")
    add_state_dir_option(p)
    p.set_defaults(func=run)


def add_state_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="serve's state folder, as given to it (default: <dir>/.rayqueue)",
    )


def history_path(args: argparse.Namespace) -> Path:
    given = getattr(args, "state_dir", None)
    folder = given if given is not None else tasks_dir(getattr(args, "dir", None)) / ".rayqueue"
    return Path(folder) / FILE_NAME


@dataclass(frozen=True)
class Target:
    """What a suggestion is made for: a task, or an array and its elements' shared file."""

    name: str
    path: Path | None
    declared: Capacity


def targets(views: Sequence[TaskView]) -> dict[str, Target]:
    """Each task and array of the folder by name, with its file and what it declares."""
    out: dict[str, Target] = {}
    for view in views:
        task = view.task
        if task is None:
            continue
        parts = split(view.name)
        name = parts[0] if parts is not None else view.name
        if name in out:
            continue
        res = task.spec.resources
        out[name] = Target(name, view.path, Capacity(res.cpu, res.gpu, float(res.memory)))
    return out


def suggestion_of(target: Target, records: Sequence[RunRecord]) -> Suggestion | None:
    return suggest(target.name, records, target.declared)


def diff_of(target: Target, suggestion: Suggestion, root: Path) -> str:
    """The suggestion as a unified diff of the target's file ('' when nothing changes)."""
    changes = suggestion.changes(target.declared)
    if not changes or target.path is None:
        return ""
    text = target.path.read_text(encoding="utf-8")
    try:
        document = load_document(text)
    except yaml.YAMLError as exc:
        raise CliError(f"{target.path}: cannot read it as one YAML document: {exc}") from None
    if not isinstance(document, dict):
        raise CliError(f"{target.path}: not a task spec")
    new = patched(text, document, changes)
    try:
        shown = target.path.relative_to(root).as_posix()
    except ValueError:
        shown = target.path.as_posix()
    lines = difflib.unified_diff(
        text.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{shown}",
        tofile=f"b/{shown}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def patched(text: str, document: dict[str, Any], changes: dict[str, Any]) -> str:
    """The spec's text with `changes` merged into its `resources:`. A block mapping is edited
    in place by the merge patch's text edits; a flow mapping (`resources: {cpu: 4}`) is
    rewritten where it stands, one line; anything else the merge patch re-dumps."""
    patch = {"spec": {"resources": changes}}
    expected = merge_patch(document, patch)
    span = _flow_resources(text)
    if span is not None:
        resources = expected["spec"]["resources"]
        flow = "{" + ", ".join(f"{key}: {_flow(value)}" for key, value in resources.items()) + "}"
        edited = text[: span[0]] + flow + text[span[1] :]
        try:
            if load_document(edited) == expected:
                return edited
        except yaml.YAMLError:
            pass
    new, _ = patch_text(text, document, patch)
    return new


def _flow_resources(text: str) -> tuple[int, int] | None:
    """Where `spec.resources` stands in `text`, when it is a flow mapping."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    node: yaml.Node | None = root
    for key in ("spec", "resources"):
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next(
            (v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None
        )
    if isinstance(node, yaml.MappingNode) and node.flow_style:
        return node.start_mark.index, node.end_mark.index
    return None


def _flow(value: Any) -> str:
    """A value in YAML flow syntax: a plain word where it reads back as itself, else JSON."""
    if isinstance(value, str) and value.isalnum():
        try:
            if yaml.safe_load(value) == value:
                return value
        except yaml.YAMLError:
            pass
    return json.dumps(value)


def run(args: argparse.Namespace) -> int:
    if bool(args.name) == bool(args.all):
        raise CliError("name one task, or pass --all", 2)
    root = tasks_dir(getattr(args, "dir", None))
    found = targets(load_views(open_service(args)))
    grouped = families(read_records(history_path(args)))
    if args.name:
        target = found.get(args.name)
        if target is None:
            raise CliError(f'task "{args.name}" not found')
        chosen = [target]
    else:
        chosen = [found[name] for name in sorted(found) if name in grouped]
    out: list[str] = []
    for target in chosen:
        suggestion = suggestion_of(target, grouped.get(target.name, []))
        if suggestion is None:
            if args.name:
                runs = len(grouped.get(target.name, []))
                print(
                    f"{target.name}: no suggestion yet ({runs} recorded run"
                    f"{'s' if runs != 1 else ''}; see --help for what one needs)",
                    file=sys.stderr,
                )
            continue
        patch = diff_of(target, suggestion, root)
        if not patch:
            print(
                f"{target.name}: the declared resources fit ({suggestion.words()})", file=sys.stderr
            )
            continue
        print(f"{target.name}: {suggestion.words()}", file=sys.stderr)
        out.append(patch)
    sys.stdout.write("".join(out))
    return EXIT_OK
