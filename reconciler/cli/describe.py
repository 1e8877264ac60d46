"""`rayqueue describe NAME`: spec, status, conditions, Ray job and log tail of one task."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import datetime

import yaml

from reconciler.cli import common
from reconciler.cli.common import (
    EXIT_OK,
    HelpFormatter,
    Subparsers,
    add_address_option,
    address_of,
    find_view,
    folder_parent,
    load_views,
    number,
    open_service,
    table,
)
from reconciler.cli.suggest import add_state_dir_option, history_path
from reconciler.core.task.dependencies import RunView, judge
from reconciler.core.task.depnames import DependencyViews
from reconciler.core.task.retries import policy_for
from reconciler.shell.ops.rightsize import RunRecord, families, suggest
from reconciler.shell.ops.runhistory import read_records
from specs.cluster import Capacity, RayError, TailLimits
from specs.service.arrayviews import ArrayView, elements_of
from specs.service.views import NOT_SEEN_MESSAGE, TaskView, human_age, rfc3339
from specs.task.arrays import split
from specs.task.models import Resources
from specs.task.quantity import human_memory, readable_memory
from specs.yamlio.parse import MAX_FILE_BYTES, SpecParseError, parse_task

LOG_TIMEOUT_SECONDS = 5.0
LABEL_WIDTH = 22
# The last lines of Ray's failure message (the job's log end) shown under a failed element.
FAILED_LOG_LINES = 10

EPILOG = """\
The log tail is the one the reconciler saved for a failed run; otherwise, when a Ray address
is known (--address, $RAY_DASHBOARD_ADDRESS, $RAY_ADDRESS), the last lines are read from Ray.

examples:
  rayqueue describe train
  rayqueue describe team-a/train --address http://head:8265 --tail 50
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "describe",
        parents=[folder_parent()],
        formatter_class=HelpFormatter,
        help="show one task in detail: spec, status, conditions, Ray job, log tail",
        description="Show everything known about one task.",
        epilog=EPILOG,
    )
    p.add_argument("name", metavar="NAME", help="the task, e.g. train or team-a/train")
    add_address_option(p)
    p.add_argument(
        "--tail", type=int, default=20, metavar="N", help="log lines to show (default 20)"
    )
    add_state_dir_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    views = load_views(open_service(args))
    runs = families(read_records(history_path(args)))
    members = elements_of(views, args.name)
    if members and not any(v.name == args.name for v in views):
        array = ArrayView(args.name, tuple(members))
        print(describe_array(array, runs.get(args.name, ())), end="")
        return EXIT_OK
    view = find_view(views, args.name)
    parts = split(view.name)
    family = runs.get(parts[0] if parts is not None else view.name, ())
    print(describe(view, address_of(args), args.tail, others=views, runs=family), end="")
    return EXIT_OK


def right_size(
    name: str, declared: Capacity, runs: Sequence[RunRecord], own: str | None = None
) -> list[tuple[str, str]]:
    """The `Last run use` and `Suggested resources` lines, from the recorded runs of `name`
    (a task, or an array's elements together; `own`: the one element described)."""
    if not runs:
        return []
    out: list[tuple[str, str]] = []
    mine = [r for r in runs if r.task == own] if own else list(runs)
    if mine:
        out.append(("Last run use", mine[-1].summary()))
    found = suggest(name, runs, declared)
    if found is None:
        many = len(runs)
        out.append(
            ("Suggested resources", f"not yet ({many} run{'s' if many != 1 else ''} recorded)")
        )
    else:
        changes = found.changes(declared)
        verdict = "as declared" if not changes else "rayqueue suggest " + name + " shows the diff"
        out.append(("Suggested resources", f"{found.words()}: {verdict}"))
    return out


def describe_array(array: ArrayView, runs: Sequence[RunRecord] = ()) -> str:
    """A task array in short: its spec (as element 0 has it), its progress, the elements that
    failed; `rayqueue describe NAME[i]` shows one element in full."""
    lines: list[str] = []

    def field(label: str, value: object, indent: int = 0) -> None:
        lines.append(f"{' ' * indent}{label + ':':<{_width(label, indent)}}{value}")

    first = array.first
    field("Name", array.name)
    field("File", first.path)
    task = first.known
    if task is not None and task.spec.array is not None:
        spec = task.spec
        form = spec.array
        assert form is not None
        field("Entrypoint", spec.entrypoint)
        field("Priority", spec.priority)
        if form.matrix is not None:
            shown = " x ".join(f"{k} ({len(v)})" for k, v in form.matrix.items())
            field("Matrix", shown)
        elif form.values is not None:
            field("Values", f"{len(form.values)} listed")
        field("Elements", len(array.elements))
        field("Max parallel", form.max_parallel or "no limit")
        res = spec.resources
        for label, words in right_size(
            array.name, Capacity(res.cpu, res.gpu, float(res.memory)), runs
        ):
            field(label, words)
    field("Phase", array.phase)
    queue = next((e.body.queue for e in array.elements if e.body and e.body.queue), None)
    if queue is not None:
        field("Queue", queue)
    field("Progress", array.progress)
    failed = [e for e in array.elements if e.phase in ("Failed", "TimedOut", "Lost")]
    if failed:
        lines.append("Failed elements:")
        messages = {e.name: ((e.body.message or "") if e.body else "") for e in failed[:20]}
        rows = [
            [
                e.name,
                e.phase,
                str(e.body.exit_code) if e.body and e.body.exit_code is not None else "-",
                messages[e.name].split("\n", 1)[0],
            ]
            for e in failed[:20]
        ]
        lines.extend(
            "  " + line
            for line in table(("ELEMENT", "PHASE", "EXIT", "MESSAGE"), rows).splitlines()
        )
        if len(failed) > 20:
            lines.append(
                f"  ... and {len(failed) - 20} more (rayqueue get {array.name} --elements)"
            )
        # Ray's message of a failed job ends with the job's last log lines: each element's
        # are shown apart, under its name, so that they never run into the table's rows.
        for name, message in messages.items():
            logged = message.split("\n")[1:]
            if any(line.strip() for line in logged):
                lines.append(f"Log lines in {name}'s message (last {FAILED_LOG_LINES}):")
                lines.extend(f"  {line}" for line in logged[-FAILED_LOG_LINES:])
    return "\n".join(lines) + "\n"


def _run_views(views: Sequence[TaskView]) -> dict[str, RunView]:
    """Every task's phase and end, as the dependency gate sees them."""
    result: dict[str, RunView] = {}
    for v in views:
        if v.body is not None:
            ended = v.body.finished_at
            result[v.name] = RunView(v.body.phase, ended.timestamp() if ended else None)
    return result


def describe(
    view: TaskView,
    address: str | None,
    tail_lines: int,
    others: Sequence[TaskView] = (),
    runs: Sequence[RunRecord] = (),
) -> str:
    """`runs`: the recorded runs of the task (of every element, for an array's element)."""
    now = time.time()
    lines: list[str] = []
    add = lines.append

    def field(label: str, value: object, indent: int = 0) -> None:
        add(f"{' ' * indent}{label + ':':<{_width(label, indent)}}{value}")

    task = view.task
    field("Name", view.name)
    field("File", view.path)
    if task is not None:
        meta = task.metadata
        field("Labels", ", ".join(f"{k}={v}" for k, v in sorted(meta.labels.items())) or "<none>")
        annotations = sorted(meta.annotations.items())
        field("Annotations", ", ".join(f"{k}={v}" for k, v in annotations) or "<none>")
        spec = task.spec
        res = spec.resources
        add("Spec:")
        field("Entrypoint", spec.entrypoint, 2)
        field("Priority", spec.priority, 2)
        resources = f"{number(res.cpu)} CPU, {number(res.gpu)} GPU, {readable_memory(res.memory)}"
        field("Resources", resources + " memory", 2)
        parts = split(view.name)
        family = parts[0] if parts is not None else view.name
        declared = Capacity(res.cpu, res.gpu, float(res.memory))
        for label, words in right_size(family, declared, runs, own=view.name):
            field(label, words, 2)
        timeout = f"{number(spec.timeout_seconds)}s" if spec.timeout_seconds else "none"
        field("Timeout", timeout, 2)
        field("Suspend", str(spec.suspend).lower(), 2)
        if spec.submission_id:
            field("Submission id", spec.submission_id, 2)
        if spec.retry is not None:
            retry = spec.retry
            delays = policy_for(retry, None).schedule()
            shown = ", ".join(f"{number(d)}s" for d in delays[:6]) + (", ..." if delays[6:] else "")
            final = retry.non_retryable_exit_codes
            field(
                "Retry",
                f"limit {retry.limit}, on {', '.join(retry.on) or 'nothing'}"
                + (f", after {shown}" if delays else "")
                + (f"; final exit codes {', '.join(map(str, final))}" if final else ""),
                2,
            )
        elif spec.max_lost_restarts is not None:
            field("Max lost restarts", f"{spec.max_lost_restarts} (deprecated: use retry)", 2)
        if spec.depends_on:
            add("  Depends on:")
            views = DependencyViews(_run_views(others))
            judgement = judge(spec.depends_on, views.of(view.name, spec.depends_on))
            lines.extend(f"    {state.describe()}" for state in judgement.states)
        if spec.runtime_env:
            add("  Runtime env:")
            dumped = yaml.safe_dump(spec.runtime_env, sort_keys=False, width=10_000)
            lines.extend(f"    {line}" for line in dumped.splitlines())
    else:
        field("Spec", "invalid")
        lines.extend(f"  {error}" for error in _all_errors(view))

    body = view.body
    if body is None:
        field("Status", f"<none>: {NOT_SEEN_MESSAGE}")
    else:
        add("Status:")
        field("Phase", body.phase.value, 2)
        if body.queue is not None:  # the team queue the loop put it in (with _queues.yaml)
            field("Queue", body.queue, 2)
        field("Reason", body.reason or "", 2)
        message, *logged = (body.message or "").split("\n")
        field("Message", message, 2)
        if any(line.strip() for line in logged):  # Ray's failure message ends with log lines
            add("    Log lines in the message:")
            lines.extend(f"      {line}" for line in logged[-FAILED_LOG_LINES:])
        if body.queue_position is not None:
            field("Queue position", body.queue_position, 2)
        if body.estimated_start_at is not None:
            field("Estimated start", _when(body.estimated_start_at, now), 2)
        field("Run", body.run, 2)
        hash_note = " (an older version of the spec; the reconciler has not caught up)"
        field("Spec hash", f"{body.spec_hash or '-'}{hash_note if view.stale else ''}", 2)
        for label, value in (
            ("Queued at", body.queued_at),
            ("Submitted at", body.submitted_at),
            ("Started at", body.started_at),
            ("Finished at", body.finished_at),
        ):
            if value is not None:
                field(label, _when(value, now), 2)
        if body.exit_code is not None:
            field("Exit code", body.exit_code, 2)
        if body.retries or body.lost_restarts:
            field("Retries", max(body.retries, body.lost_restarts), 2)
        if body.next_retry_at is not None:
            field("Next retry at", _when(body.next_retry_at, now), 2)

    conditions = body.conditions if body is not None else []
    if conditions:
        add("Conditions:")
        rows = [
            [c.type, c.status, c.reason, _when(c.last_transition_time, now), c.message]
            for c in conditions
        ]
        header = ("TYPE", "STATUS", "REASON", "SINCE", "MESSAGE")
        lines.extend(f"  {line}" for line in table(header, rows).splitlines())
    else:
        field("Conditions", "<none>")

    sid = body.submission_id if body is not None else None
    if sid:
        add("Ray job:")
        field("Submission id", sid, 2)
        field("Ray status", body.ray_status if body and body.ray_status else "-", 2)
        if address:
            field("Dashboard", common.dashboard_link(address, sid), 2)
        else:
            field("Dashboard", "pass --address (or set RAY_DASHBOARD_ADDRESS) for a link", 2)
        if address and body is not None and body.phase.active and task is not None:
            field("Holds in Ray", _held_in_ray(address, sid, task.spec.resources), 2)
    else:
        field("Ray job", "<none> (not submitted yet)")

    log_tail = body.log_tail if body is not None else None
    if log_tail:
        add("Log tail (saved when the run failed):")
        lines.extend(f"  {line}" for line in log_tail.splitlines()[-tail_lines:])
    elif sid and address and tail_lines > 0:
        add(f"Log tail (last {tail_lines} lines from Ray):")
        lines.extend(f"  {line}" for line in _ray_log_tail(address, sid, tail_lines))
    return "\n".join(lines) + "\n"


def _width(label: str, indent: int) -> int:
    """The column a value starts at, past the label: a label as long as the column still
    leaves a space before its value."""
    return max(LABEL_WIDTH - indent, len(label) + 2)


def _when(value: datetime, now: float) -> str:
    delta = now - value.timestamp()
    relative = f"{human_age(delta)} ago" if delta >= 0 else f"in {human_age(-delta)}"
    return f"{rfc3339(value)} ({relative})"


def _all_errors(view: TaskView) -> list[str]:
    """Every problem of the file; the scan remembers only the first."""
    first = [str(view.error)] if view.error is not None else []
    path = view.path
    if path is None:
        return first
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return first
        data = path.read_bytes()
        parse_task(data, file=str(path), expected_name=view.name.rsplit("/", 1)[-1])
    except SpecParseError as exc:
        return [str(e) for e in exc.errors]
    except OSError:
        pass
    return first


def _amounts(cpu: float, gpu: float, memory: float) -> str:
    held = human_memory(memory) if memory else "0"  # as the Resources line writes none
    return f"{number(cpu)} CPU, {number(gpu)} GPU, {held} memory"


def _held_in_ray(address: str, submission_id: str, declared: Resources) -> str:
    """What the run's Ray job holds now (its placement groups, actors and running tasks, as
    Ray's State API counts them) beside what the spec declares."""
    try:
        adapter = common.make_adapter(address, LOG_TIMEOUT_SECONDS)
        held = adapter.holdings_of(submission_id)
    except (RayError, common.CliError) as exc:
        return f"(could not ask Ray: {exc})"
    if held is None:
        return "(its driver has not started)"
    now = held.logical
    words = _amounts(now.cpu, now.gpu, now.memory)
    words += f" (declared {_amounts(declared.cpu, declared.gpu, declared.memory)})"
    return words if held.complete else words + "; at least: a list Ray gave was cut"


def _ray_log_tail(address: str, submission_id: str, lines: int) -> list[str]:
    try:
        adapter = common.make_adapter(address, LOG_TIMEOUT_SECONDS)
        text = adapter.log_tail(submission_id, TailLimits.requested(lines))
    except (RayError, common.CliError) as exc:
        return [f"(could not read the log from Ray: {exc})"]
    return text.splitlines() or ["(empty)"]
