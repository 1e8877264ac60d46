"""`rayqueue plan`: a dry run of the next reconcile pass, read-only on the folder and on Ray.

Models: Argo CD's `app diff` and Slurm's `sbatch --test-only`. The pass is planned by the same
pure planner entry, with the same options, that `rayqueue serve` uses (from an empty memo: a
full pass, as serve's first); only its actions are printed instead of carried out. Ray is
asked twice (the job list and the capacity), as in a pass. Unlike serve it reads no git
sources (status.source, which it does not print) and does not confine runtimeEnv local paths
(--working-dir-root and team tokens are serve's).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from datetime import UTC, datetime

from reconciler.cli import common
from reconciler.cli.common import (
    EXIT_OK,
    CliError,
    HelpFormatter,
    Subparsers,
    add_address_option,
    folder_parent,
    number,
    open_store,
    require_address,
    table,
)
from reconciler.cli.serve import add_loop_options, loop_settings
from reconciler.core import incremental, planner
from reconciler.core.planner import Plan, TaskInput
from reconciler.core.preemption import rules
from reconciler.shell.loop.inputs import plan_options, queue_file, scan_specs
from reconciler.shell.loop.raystate import observe_ray
from specs.cluster import Capacity, RayError
from specs.folder.store import FolderUnavailable
from specs.task.models import Phase
from specs.task.quantity import human_memory
from specs.task.status import TaskStatus

EPILOG = """\
The queue id must match the one `rayqueue serve` uses, or the plan treats the queue's jobs as
foreign: run `plan` with the same --dir from the same working directory (the default id is
derived from the folder's absolute path), or pass the same --queue-id. Give the same
--policy and other loop options as serve, too.

examples:
  rayqueue plan --dir tasks --address http://head:8265
  RAY_DASHBOARD_ADDRESS=http://head:8265 rayqueue plan --policy besteffort
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "plan",
        parents=[folder_parent()],
        formatter_class=HelpFormatter,
        help="dry run: what the next pass would submit, stop or time out, and why others wait",
        description="Read the folder, the sidecars and Ray (read-only), plan one reconcile "
        "pass with the planner and options of `rayqueue serve`, and print it. Nothing is "
        "written or submitted. Unlike serve, it reads no git sources and does not confine "
        "runtimeEnv local paths (--working-dir-root).",
        epilog=EPILOG,
    )
    add_address_option(p)
    add_loop_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    address = require_address(args, "plan")
    settings = loop_settings(args)
    options = plan_options(settings)
    store = open_store(args)
    try:
        specs = scan_specs(store)
        statuses = store.read_statuses()
    except FolderUnavailable as exc:
        raise CliError(str(exc)) from None
    # --count-foreign-jobs needs each job's entrypoint resources, as in serve.
    adapter = common.make_adapter(
        address, settings.ray_timeout_seconds, entrypoint_resources=settings.count_foreign_jobs
    )
    try:
        observed = observe_ray(adapter)
    except RayError as exc:
        raise CliError(f"cannot read Ray at {address}: {exc}") from None
    # The same queues serve would use; reading them writes nothing.
    queues = queue_file(settings)
    loaded = queues.load()
    if loaded.state is not None and not loaded.state.valid:
        print(f"warning: {queues.path} is invalid: {loaded.state.error}", file=sys.stderr)
    for item in loaded.bounded:  # a team's own file asked beyond its parent: bounded
        print(f"warning: {item.note}", file=sys.stderr)
    now = datetime.now(UTC)
    result, _ = incremental.plan_incremental(
        incremental.EMPTY,
        specs,
        statuses,
        observed,
        now,
        options,
        queues=loaded.config,
        queue_error=loaded.error_without_config,
    )

    mode = f", preemption {options.preemption}" if options.preemption != "Never" else ""
    if mode and options.preemption_min_preemptor_priority:
        mode += f" by priority {options.preemption_min_preemptor_priority} and up"
    if loaded.config is not None and rules.setup(loaded.config, options).any_on:
        mode = f", preemption per queue ({queues.path.name})"
    print(
        f"Plan for {store.root} (queue {options.queue_id}, policy {options.policy}{mode}), "
        f"Ray at {address}"
    )
    print(report(result, specs, statuses), end="")
    return EXIT_OK


def report(result: Plan, specs: Mapping[str, TaskInput], statuses: Mapping[str, TaskStatus]) -> str:
    """The plan in words. Pure, so it is tested without Ray."""
    out: list[str] = []
    summary = result.summary
    if summary is not None and summary.capacity is not None:
        cap, used = summary.capacity, summary.used
        out.append(
            f"Cluster: {_amount(cap)}; after this pass, held by this queue: {_amount(used)}, "
            f"free: {_amount(cap - used)}"
        )

    def section(title: str, header: tuple[str, ...], rows: list[list[str]]) -> None:
        if rows:
            out.append("")
            out.append(f"{title} ({len(rows)}):")
            out.extend(f"  {line}" for line in table(header, rows).splitlines())

    def phase_of(name: str) -> Phase | None:
        prev = statuses.get(name)
        return prev.status.phase if prev is not None else None

    submits = []
    for submit in result.submits:
        task = specs[submit.task].task or specs[submit.task].last_valid
        recorded = phase_of(submit.task) is Phase.STARTING  # crash between write and submit
        note = "resubmit: recorded, but not in Ray" if recorded else ""
        submits.append(
            [
                submit.task,
                str(task.spec.priority) if task else "-",
                _amount(planner.request_of(task), short=True) if task else "-",
                submit.request.submission_id,
                note,
            ]
        )
    section("Would submit", ("NAME", "PRIORITY", "RESOURCES", "SUBMISSION ID", ""), submits)

    preempts = [
        [victim, p.preemptor, f"{reason}: {_victim_message(result, victim)}"]
        for p in result.preemptions
        for victim, reason in zip(p.victims, p.reasons or (p.reason,) * len(p.victims), strict=True)
    ]
    section("Would preempt", ("NAME", "FOR", "WHY"), preempts)

    stops = [[s.task or "-", s.submission_id, s.reason] for s in result.stops]
    section("Would stop", ("NAME", "SUBMISSION ID", "WHY"), stops)

    timeouts = [[t.task, t.message] for t in sorted(result.timeouts, key=lambda t: t.task)]
    changes = []
    shown = {s.task for s in result.submits} | {t.task for t in result.timeouts}
    shown |= {victim for p in result.preemptions for victim in p.victims}
    for name, status in sorted(result.statuses.items()):
        body, before = status.status, phase_of(name)
        if before is not body.phase and name not in shown and body.phase not in _LISTED:
            was = before.value if before is not None else "(new)"
            changes.append([name, f"{was} -> {body.phase.value}", body.message or ""])
    section("Would time out", ("NAME", "WHY"), timeouts)
    section("Would record", ("NAME", "PHASE", "MESSAGE"), changes)

    # The plan knows every exact place (its summary's queue order), also beyond the ones a
    # sidecar shows exactly (docs/scheduling.md, Queue positions).
    places = {}
    if result.summary is not None:
        for names in result.summary.order.values():
            places.update({name: i for i, name in enumerate(names, start=1)})
    waiting = sorted(
        ((n, s.status) for n, s in result.statuses.items() if s.status.phase is Phase.QUEUED),
        key=lambda item: (places.get(item[0]) or item[1].queue_position or math.inf, item[0]),
    )
    rows = []
    for name, body in waiting:
        task = specs[name].task
        place = places.get(name) or body.queue_position
        rows.append(
            [
                str(place or "-"),
                name,
                str(task.spec.priority) if task else "-",
                f"{body.reason}: {body.message}" if body.reason else body.message or "",
            ]
        )
    section("Waiting", ("POSITION", "NAME", "PRIORITY", "WHY"), rows)

    unschedulable = [
        [n, s.status.message or ""]
        for n, s in sorted(result.statuses.items())
        if s.status.phase is Phase.UNSCHEDULABLE
    ]
    section("Unschedulable", ("NAME", "WHY"), unschedulable)

    if result.refused_deletions is not None:
        out.append("")
        out.append(f"Held: {result.refused_deletions.message}")
    if not (submits or stops or timeouts):
        out.append("")
        out.append("Nothing to submit, stop or time out.")
    out.append("")
    out.append("Nothing was changed; this is what the next pass of `rayqueue serve` would do.")
    return "\n".join(out) + "\n"


def _victim_message(result: Plan, victim: str) -> str:
    status = result.statuses.get(victim)
    return (status.status.message or "") if status is not None else ""


# Phases with their own section below ("Waiting", "Unschedulable").
_LISTED = frozenset({Phase.QUEUED, Phase.UNSCHEDULABLE})


def _amount(value: Capacity, *, short: bool = False) -> str:
    parts = [
        (value.cpu, f"{number(value.cpu)} CPU"),
        (value.gpu, f"{number(value.gpu)} GPU"),
        (value.memory, f"{human_memory(max(value.memory, 0))} memory"),
    ]
    shown = [text for amount, text in parts if amount or not short]
    return ", ".join(shown) or "nothing"
