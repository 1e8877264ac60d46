"""`rayqueue queues`: each team queue's quota, use and counts, from `_queues.status.yaml`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from reconciler.cli.common import (
    EXIT_OK,
    CliError,
    HelpFormatter,
    Subparsers,
    folder_parent,
    table,
    tasks_dir,
)
from reconciler.shell.loop.queuefile import read_status
from specs.queues.config import CONFIG_FILE, STATUS_FILE
from specs.task.quantity import readable_memory, readable_resources

HEADER = (
    "NAME",
    "NOMINAL",
    "USED",
    "BORROWED",
    "PAST",
    "SHARE",
    "PENDING",
    "RUNNING",
    "PREEMPTION",
    "BORROWING-LIMIT",
)
# -o wide: beside them, what each queue's live runs declare, hold in Ray and use, as the last
# census saw them.
WIDE = ("RUNS-SEEN", "DECLARED", "HELD", "IN-USE")

EPILOG = f"""\
The figures are the reconciler's at its last pass, read from {STATUS_FILE} (beside the
configuration, or under --status-dir). PAST is the queue's decayed usage (fairSharing in
_queues.yaml: resources x hours, each hour counting half after usageHalfLife). SHARE is the
weighted share the next start is ordered by: the largest over CPU, GPU and memory of what the
queue uses above its nominal quota, now plus its decayed mean use, over what the queues can
lend, divided by its weight. RUNNING counts Starting and Running tasks. A sub-queue (nested
queues: team-a/_queues.yaml) is indented under its queue, whose counts include its sub-queues'.
PREEMPTION and BORROWING-LIMIT say what the queue may do once bounded by its parent: a team's
own file divides what its parent grants, never widens it; a value marked * was bounded, and a
warning names the file, line and field (-o yaml shows the whole `effective` block).
-o wide adds what the census of Ray's jobs last saw of each queue's live runs: RUNS-SEEN,
what they DECLARED, what they HELD in Ray (placement groups, actors, running tasks) and what
their processes had IN-USE (cores busy, resident memory): a queue that holds far less than
it declares reserves idle capacity. `-` until serve has taken a census.

examples:
  rayqueue queues
  rayqueue queues -o wide
  rayqueue queues -o yaml
  rayqueue queues --queues /etc/rayqueue/queues.yaml
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "queues",
        parents=[folder_parent()],
        formatter_class=HelpFormatter,
        help="list the team queues with quota, use and counts",
        description="List the team queues defined in _queues.yaml, with their quota and use.",
        epilog=EPILOG,
    )
    p.add_argument(
        "--queues",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"the queue configuration, as given to serve (default: <dir>/{CONFIG_FILE})",
    )
    p.add_argument("-o", "--output", choices=["table", "wide", "yaml", "json"], default="table")
    p.set_defaults(func=run)


def status_path(args: argparse.Namespace) -> tuple[Path, Path]:
    """(the config, its status file), as serve places them."""
    config = args.queues or tasks_dir(getattr(args, "dir", None)) / CONFIG_FILE
    status_dir = getattr(args, "status_dir", None)
    return config, (status_dir or config.parent) / STATUS_FILE


def run(args: argparse.Namespace) -> int:
    config, path = status_path(args)
    document = read_status(path)
    if document is None:
        if not config.exists():
            raise CliError(f"no queues are configured: there is no {config}")
        raise CliError(f"no queue status at {path} yet: is `rayqueue serve` running?")
    if args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(document, sort_keys=False))
        return EXIT_OK
    if args.output == "json":
        print(json.dumps(document, indent=2))
        return EXIT_OK
    body = document.get("status", {})
    state = body.get("config", {})
    if not state.get("valid", True):
        kept = "the last good one is in force" if state.get("inForce") else "no queues in force"
        print(f"warning: {config} is invalid ({kept}): {state.get('error')}", file=sys.stderr)
    if body.get("warning"):
        print(f"warning: {body['warning']}", file=sys.stderr)
    for q in body.get("queues", []):
        for item in _bounded(q):
            print(f"warning: {item.get('message')}", file=sys.stderr)
    depth = _depths(body.get("queues", []))
    rows = [
        (
            "  " * depth.get(str(q.get("name")), 0) + str(q.get("name")),
            amounts(q.get("nominalQuota")),
            amounts(q.get("usage")),
            amounts(q.get("borrowed")),
            hours(q.get("decayedUsage")),
            f"{float(q.get('weightedShare', 0)):.3f}",
            str(q.get("pending", 0)),
            str(q.get("admitted", 0)),
            preemption(q),
            borrowing_limit(q),
            *(observed(q) if args.output == "wide" else ()),
        )
        for q in body.get("queues", [])
    ]
    print(table(HEADER + WIDE if args.output == "wide" else HEADER, rows))
    return EXIT_OK


def observed(entry: Any) -> tuple[str, str, str, str]:
    """The census's figures of a queue's live runs: how many, declared, held, in use."""
    block = entry.get("observed") if isinstance(entry, dict) else None
    if not isinstance(block, dict):
        return ("-", "-", "-", "-")
    return (
        str(block.get("runs", 0)),
        amounts(block.get("declared")),
        amounts(block.get("held")) + ("" if block.get("complete", True) else " (at least)"),
        amounts(block.get("used")),
    )


def _bounded(entry: Any) -> list[dict[str, Any]]:
    """The fields of a queue that its own file asked beyond what its parent grants."""
    effective = entry.get("effective") if isinstance(entry, dict) else None
    items = effective.get("bounded") if isinstance(effective, dict) else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _marked(entry: Any) -> set[str]:
    return {str(item.get("field")) for item in _bounded(entry)}


def preemption(entry: Any) -> str:
    """`within=LowerPriority,reclaim=Any` (the modes that are not Never), `none`; `*` marks a
    mode bounded by the parent; `-` for a status written without the effective block."""
    effective = entry.get("effective") if isinstance(entry, dict) else None
    block = effective.get("preemption") if isinstance(effective, dict) else None
    if not isinstance(block, dict):
        return "-"
    marked = _marked(entry)
    parts = []
    for key, short in (("withinQueue", "within"), ("reclaimWithinCohort", "reclaim")):
        mode = block.get(key, "Never")
        star = "*" if f"preemption.{key}" in marked else ""
        if mode != "Never" or star:
            parts.append(f"{short}={mode}{star}")
    return ",".join(parts) or "none"


def borrowing_limit(entry: Any) -> str:
    """`cpu=4,memory=8Gi` (resources without a limit left out), `none` without any; `*` marks
    an amount bounded by the parent."""
    effective = entry.get("effective") if isinstance(entry, dict) else None
    limits = effective.get("borrowingLimit") if isinstance(effective, dict) else None
    if not isinstance(limits, dict):
        return "-"
    marked = _marked(entry)
    parts = []
    for key in ("cpu", "gpu", "memory"):
        if key in limits:
            star = "*" if f"borrowingLimit.{key}" in marked else ""
            value = limits[key]
            shown = (
                readable_memory(value)
                if key == "memory"
                else f"{value:g}"
                if isinstance(value, int | float)
                else str(value)
            )
            parts.append(f"{key}={shown}{star}")
    return ",".join(parts) or "none"


def _depths(entries: list[Any]) -> dict[str, int]:
    """How deep each queue lies (0: a top queue): a sub-queue is indented under its parent."""
    parent = {str(q.get("name")): q.get("parent") for q in entries if isinstance(q, dict)}
    depth: dict[str, int] = {}
    for name in parent:
        level, above = 0, parent.get(name)
        while isinstance(above, str) and level < len(parent):
            level, above = level + 1, parent.get(above)
        depth[name] = level
    return depth


def hours(value: Any) -> str:
    """Decayed usage in resource-hours: `12.5 CPU-h, 1 GPU-h` (memory left out); `-` if none."""
    if not isinstance(value, dict):
        return "-"
    parts = []
    for key, unit in (("cpu", "CPU-h"), ("gpu", "GPU-h")):
        amount = value.get(key)
        if isinstance(amount, int | float) and amount > 0:
            parts.append(f"{amount / 3600:.3g} {unit}")
    return ", ".join(parts) or "0"


def amounts(value: Any) -> str:
    """`64 CPU, 8 GPU, 256Gi`; resources at zero are left out; `0` if all are."""
    if not isinstance(value, dict):
        return "-"
    return readable_resources(value.get("cpu"), value.get("gpu"), value.get("memory"))
