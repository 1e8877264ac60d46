"""The simulator against the real head: one slice of the Lublin trace, replayed both ways.

python -m benchmarks.replay --trace /work/shared/traces/lublin_256.swf

A slice of the trace (60 jobs at most 4 CPUs wide, by default), times scaled to seconds, goes
over two team queues (job i to team-a or team-b by turn, nominal 2 CPU each, preemption within
the queue and by reclaim for priority >= 7) on 4 CPUs:

1. through `rayqueue serve` (`python -m reconciler.cli.main serve`) on a private local Ray
   head: each task file lands by rename at its job's scaled arrival, its entrypoint `sleep`s
   the scaled run time (and dies on SIGTERM, so a preempted run ends at once);
2. through the simulator (reconciler.sim.engine.simulate) with the same jobs and queue file.

Then the start order, the preemptions (victim, preemptor, when) and each job's wait are set
side by side. A start is the submission of a task's first run on both sides (Ray's job
start_time; the simulator's submit), a wait is that start minus the arrival. The real replay
takes as long as the real head needs for the work: about 8 minutes by the simulator's clock,
13 on a loaded 2-core machine (docs/scheduling.md, "The simulator against the real head").
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import save
from reconciler.sim.engine import simulate
from reconciler.sim.teams import split_over
from reconciler.sim.workload import Job, read_swf
from specs.cluster import META_TASK, RayJob
from specs.folder.atomic import write_atomic
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config

CAPACITY = 4
QUEUES = ("team-a", "team-b")
POLICY = "backfill"
MEMORY_BYTES = 8 * 2**30

QUEUE_FILE = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
{entries}"""
QUEUE_ENTRY = """\
    - name: {name}
      nominalQuota: {{cpu: {nominal}}}
      preemption:
        withinQueue: LowerPriority
        reclaimWithinCohort: Any
        minPreemptorPriority: {min_priority}
        gracePeriodSeconds: {grace}
"""


@dataclass(frozen=True)
class Scale:
    """How trace times become replay seconds. Arrivals are squeezed linearly into `span`
    seconds; run times are multiplied by `run_factor` and clamped to [min_run, max_run] (a
    linear squeeze of both would leave most runs below a second, shorter than a Ray job takes
    to start). Each declared timeout keeps its ratio to the run, plus `timeout_slack` seconds
    for the real job's start-up."""

    span: float = 330.0
    run_factor: float = 0.02
    min_run: float = 3.0
    max_run: float = 25.0
    timeout_slack: float = 10.0


def queue_file(*, grace: float = 3, min_priority: int = 7, nominal: float = 2) -> str:
    """The `_queues.yaml` both sides read: two teams, each with its nominal share."""
    entries = "".join(
        QUEUE_ENTRY.format(name=q, nominal=nominal, min_priority=min_priority, grace=grace)
        for q in QUEUES
    )
    return QUEUE_FILE.format(entries=entries)


def parse_queues(text: str) -> QueueConfig:
    return parse_queue_config(text.encode(), file="_queues.yaml")


def scale(jobs: Sequence[Job], how: Scale) -> list[Job]:
    """The jobs in whole replay seconds (see Scale)."""
    if not jobs:
        return []
    first = jobs[0].arrival
    length = jobs[-1].arrival - first
    squeeze = how.span / length if length > 0 else 0.0
    scaled = []
    for job in jobs:
        run = float(min(how.max_run, max(how.min_run, round(job.run * how.run_factor))))
        ratio = job.timeout / job.run if job.timeout > 0 else 0.0
        timeout = float(math.ceil(run * ratio) + how.timeout_slack) if ratio else 0.0
        arrival = float(round((job.arrival - first) * squeeze))
        scaled.append(replace(job, arrival=arrival, run=run, timeout=timeout))
    return scaled


def trace_slice(
    trace: Path, *, start: int, count: int, seed: int, how: Scale = Scale()
) -> list[Job]:
    """Jobs start..start+count of the trace's jobs that fit the cluster (priorities and
    timeouts drawn as the simulator draws them for the whole trace), scaled, then dealt to the
    queues by turn: `team-a/swf-000012`."""
    jobs = read_swf(trace, limit=start + count, seed=seed, capacity_cpu=CAPACITY)[start:]
    return split_over(scale(jobs, how), QUEUES)


# -- what happened ------------------------------------------------------------------------


@dataclass(frozen=True)
class Preempted:
    at: float  # seconds from the replay's start
    victim: str
    preemptor: str


@dataclass
class Outcome:
    """One side's record: each task's first start, and every preemption."""

    starts: dict[str, float] = field(default_factory=dict)
    preemptions: list[Preempted] = field(default_factory=list)
    ends: dict[str, float] = field(default_factory=dict)  # the task's last run's end
    unfinished: list[str] = field(default_factory=list)


def simulated(jobs: Sequence[Job], queues: QueueConfig) -> Outcome:
    """The simulator's run of the same jobs: first starts, and each preemption decision."""
    outcome = Outcome()

    def observe(now: float, plan: Any) -> None:
        for decision in plan.preemptions:
            for victim in decision.victims:
                outcome.preemptions.append(Preempted(now, victim, decision.preemptor))

    result = simulate(jobs, POLICY, capacity_cpu=CAPACITY, queues=queues, observer=observe)
    for record in result.records:
        if record.start is not None:
            outcome.starts[record.job.name] = record.start
        if record.end is not None:
            outcome.ends[record.job.name] = record.end
        else:
            outcome.unfinished.append(record.job.name)
    return outcome


# -- the comparison -----------------------------------------------------------------------


def start_order(outcome: Outcome) -> list[str]:
    return sorted(outcome.starts, key=lambda name: (outcome.starts[name], name))


def discordant_pairs(first: Sequence[str], second: Sequence[str]) -> int:
    """Pairs of tasks (started on both sides) that the two orders put the other way round."""
    where = {name: i for i, name in enumerate(second)}
    common = [name for name in first if name in where]
    return sum(
        1
        for i, a in enumerate(common)
        for b in common[i + 1 :]
        if where[a] > where[b]  # a before b in `first`, after it in `second`
    )


@dataclass(frozen=True)
class Row:
    name: str
    priority: int
    cpu: float
    arrival: float
    run: float
    sim_wait: float | None
    real_wait: float | None
    sim_preempted: int
    real_preempted: int

    @property
    def delta(self) -> float | None:
        if self.sim_wait is None or self.real_wait is None:
            return None
        return self.real_wait - self.sim_wait


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    same_position: int  # tasks at the same place in both start orders
    discordant: int  # pairs started in the other order
    pairs: int  # pairs started on both sides
    sim_preemptions: list[Preempted]
    real_preemptions: list[Preempted]
    both: list[tuple[str, str]]  # (victim, preemptor) preempted on both sides
    only_sim: list[tuple[str, str]]
    only_real: list[tuple[str, str]]

    def summary(self) -> dict[str, float]:
        deltas = [r.delta for r in self.rows if r.delta is not None]
        sim = [r.sim_wait for r in self.rows if r.sim_wait is not None]
        real = [r.real_wait for r in self.rows if r.real_wait is not None]
        return {
            "jobs": len(self.rows),
            "mean_wait_sim": _mean(sim),
            "mean_wait_real": _mean(real),
            "mean_delta": _mean(deltas),
            "mean_abs_delta": _mean([abs(d) for d in deltas]),
            "max_abs_delta": max((abs(d) for d in deltas), default=0.0),
            "within_5s": sum(1 for d in deltas if abs(d) <= 5),
            "same_position": self.same_position,
            "discordant_pairs": self.discordant,
            "pairs": self.pairs,
            "preemptions_sim": len(self.sim_preemptions),
            "preemptions_real": len(self.real_preemptions),
            "preemptions_both": len(self.both),
            "preemptors_both": len(
                {p.preemptor for p in self.sim_preemptions}
                & {p.preemptor for p in self.real_preemptions}
            ),
        }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _pairs(preemptions: Sequence[Preempted]) -> list[tuple[str, str]]:
    return [(p.victim, p.preemptor) for p in preemptions]


def compare(jobs: Sequence[Job], sim: Outcome, real: Outcome) -> Comparison:
    sim_order, real_order = start_order(sim), start_order(real)
    both_started = [n for n in sim_order if n in real.starts]
    count = len(both_started)
    rows = []
    for job in sorted(jobs, key=lambda j: (j.arrival, j.name)):
        rows.append(
            Row(
                job.name,
                job.priority,
                job.cpu,
                job.arrival,
                job.run,
                _wait(sim, job),
                _wait(real, job),
                sum(1 for p in sim.preemptions if p.victim == job.name),
                sum(1 for p in real.preemptions if p.victim == job.name),
            )
        )
    sim_pairs, real_pairs = _pairs(sim.preemptions), _pairs(real.preemptions)
    unmatched = list(real_pairs)
    both, only_sim = [], []
    for pair in sim_pairs:  # a multiset match: a pair preempted twice counts twice
        if pair in unmatched:
            unmatched.remove(pair)
            both.append(pair)
        else:
            only_sim.append(pair)
    return Comparison(
        rows,
        sum(1 for a, b in zip(sim_order, real_order, strict=False) if a == b),
        discordant_pairs(sim_order, real_order),
        count * (count - 1) // 2,
        list(sim.preemptions),
        list(real.preemptions),
        both,
        only_sim,
        unmatched,
    )


def _wait(outcome: Outcome, job: Job) -> float | None:
    start = outcome.starts.get(job.name)
    return None if start is None else start - job.arrival


def render(comparison: Comparison) -> str:
    def sec(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    lines = [
        "| task | priority | CPU | arrival | run | wait sim | wait real | real - sim "
        "| preempted sim / real |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in comparison.rows:
        lines.append(
            f"| {r.name} | {r.priority} | {r.cpu:g} | {r.arrival:.0f} | {r.run:.0f} | "
            f"{sec(r.sim_wait)} | {sec(r.real_wait)} | "
            f"{'-' if r.delta is None else f'{r.delta:+.0f}'} | "
            f"{r.sim_preempted} / {r.real_preempted} |"
        )
    s = comparison.summary()
    lines += [
        "",
        f"jobs {s['jobs']:.0f}; mean wait sim {s['mean_wait_sim']:.1f} s, real "
        f"{s['mean_wait_real']:.1f} s; real - sim mean {s['mean_delta']:+.1f} s, mean |Δ| "
        f"{s['mean_abs_delta']:.1f} s, max |Δ| {s['max_abs_delta']:.0f} s; "
        f"{s['within_5s']:.0f} waits within 5 s",
        f"start order: {s['same_position']:.0f} at the same position; "
        f"{s['discordant_pairs']:.0f} of {s['pairs']:.0f} pairs the other way round",
        f"preemptions: sim {s['preemptions_sim']:.0f}, real {s['preemptions_real']:.0f}, "
        f"the same (victim, preemptor) on both {s['preemptions_both']:.0f}; "
        f"tasks that preempted on both {s['preemptors_both']:.0f}",
    ]
    for label, events in (
        ("sim", comparison.sim_preemptions),
        ("real", comparison.real_preemptions),
    ):
        for p in events:
            lines.append(f"  {label}: t={p.at:.0f} s  {p.preemptor} preempted {p.victim}")
    return "\n".join(lines)


# -- the real replay ----------------------------------------------------------------------


def spec_yaml(job: Job) -> bytes:
    spec: dict[str, Any] = {
        "entrypoint": f"sleep {job.run:.0f}",
        "priority": job.priority,
        "resources": {"cpu": job.cpu},
    }
    if job.timeout > 0:
        spec["timeoutSeconds"] = job.timeout
    return yaml.safe_dump({"apiVersion": "rayqueue/v1", "kind": "Task", "spec": spec}).encode()


FINISHED = ("Succeeded", "Failed", "Cancelled")


def _sidecar(folder: Path, name: str) -> Mapping[str, Any]:
    try:
        doc = yaml.safe_load((folder / f"{name}.status.yaml").read_bytes())
    except (OSError, yaml.YAMLError):
        return {}
    status = doc.get("status") if isinstance(doc, dict) else None
    return status if isinstance(status, dict) else {}


class _Watch:
    """Polls the sidecars for the tasks that have finished."""

    def __init__(self, folder: Path, names: Sequence[str]) -> None:
        self.folder, self.names = folder, list(names)
        self.finished: set[str] = set()

    def poll(self) -> None:
        for name in self.names:
            if name not in self.finished and _sidecar(self.folder, name).get("phase") in FINISHED:
                self.finished.add(name)


# serve's log line for each preemption decision (reconciler/core/preemption/preempt.py notes it):
# "2026-12-01 12:40:32,314 INFO rayqueue.loop: preempted a, b for p (priority 7...)".
PREEMPTED_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) \S+ rayqueue\.loop: "
    r"preempted (.+?) for (\S+) \(priority",
    re.MULTILINE,
)


def log_preemptions(text: str, t0: float) -> list[Preempted]:
    """The preemptions serve decided, from its log (local time), in seconds from `t0`."""
    found = []
    for stamp, millis, victims, preemptor in PREEMPTED_LINE.findall(text):
        at = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(millis) / 1000 - t0
        found += [Preempted(round(at, 3), v, preemptor) for v in victims.split(", ")]
    return found


def real(
    jobs: Sequence[Job], queues_text: str, root: Path, *, tail: float = 600
) -> tuple[Outcome, dict[str, Any]]:
    """Replay `jobs` through serve on a private local Ray head; return what Ray recorded."""
    from benchmarks.served import serve_process, wait
    from reconciler.shell.raycluster.adapter import RayJobsAdapter
    from reconciler.shell.raycluster.local_head import LocalRayHead

    folder = root / "tasks"
    for queue in QUEUES:
        (folder / queue).mkdir(parents=True)
    write_atomic(folder / "_queues.yaml", queues_text.encode())
    head = LocalRayHead()
    try:
        address = head.start(num_cpus=CAPACITY, memory_bytes=MEMORY_BYTES)
        ray = RayJobsAdapter(address, timeout_seconds=30)
        with serve_process(address, folder, root / "serve.log", queue_id="replay"):
            watch = _Watch(folder, [j.name for j in jobs])
            order = sorted(jobs, key=lambda j: (j.arrival, j.name))
            t0 = time.time()
            arrivals: dict[str, float] = {}
            for job in order:
                while time.time() < t0 + job.arrival:
                    watch.poll()
                    time.sleep(min(0.25, max(0.0, t0 + job.arrival - time.time())))
                # Landed whole by rename, as a user or git-sync does.
                write_atomic(folder / f"{job.name}.yaml", spec_yaml(job))
                arrivals[job.name] = time.time() - t0

            def done() -> bool | None:
                watch.poll()
                time.sleep(0.25)
                return True if len(watch.finished) == len(jobs) else None

            with contextlib.suppress(RuntimeError):  # reported as unfinished
                wait(done, tail, "every task to finish")
            listing = list(ray.list_jobs())
        log = log_preemptions((root / "serve.log").read_text(errors="replace"), t0)
        outcome = _outcome(listing, log, watch.finished, t0, [j.name for j in jobs])
        lag = {n: arrivals[n] - j.arrival for j in jobs for n in [j.name]}
        return outcome, {"arrival_lag_max": max(lag.values(), default=0.0)}
    finally:
        head.stop()


def _outcome(
    listing: Sequence[RayJob],
    preemptions: list[Preempted],
    finished: set[str],
    t0: float,
    names: Sequence[str],
) -> Outcome:
    """Each task's first start and last end as Ray recorded them; the log's preemptions."""
    runs: dict[str, list[RayJob]] = {}
    for job in listing:
        task = job.metadata.get(META_TASK)
        if task is not None and task in names and job.start_time is not None:
            runs.setdefault(task, []).append(job)
    outcome = Outcome(preemptions=sorted(preemptions, key=lambda p: (p.at, p.victim)))
    for task, task_runs in runs.items():
        task_runs.sort(key=lambda j: j.start_time or 0.0)
        outcome.starts[task] = (task_runs[0].start_time or 0.0) - t0
        if task_runs[-1].end_time is not None:
            outcome.ends[task] = (task_runs[-1].end_time or 0.0) - t0
    outcome.unfinished = [n for n in names if n not in finished]
    return outcome


def run_overhead(jobs: Sequence[Job], real_side: Outcome, preempted: set[str]) -> float:
    """What a real run costs beyond its sleep, in whole seconds (the simulator's unit): the
    median, over the tasks never preempted, of Ray's end minus Ray's start minus the run.
    The simulator has none: its job runs the moment it is submitted and ends on time."""
    extra = sorted(
        real_side.ends[j.name] - real_side.starts[j.name] - j.run
        for j in jobs
        if j.name in real_side.ends and j.name in real_side.starts and j.name not in preempted
    )
    return float(round(extra[len(extra) // 2])) if extra else 0.0


def with_overhead(jobs: Sequence[Job], seconds: float) -> list[Job]:
    """Each run (and its declared timeout) longer by `seconds`, for the simulator."""
    return [
        replace(j, run=j.run + seconds, timeout=j.timeout + seconds if j.timeout else 0.0)
        for j in jobs
    ]


def load_real(path: Path) -> Outcome:
    """The real side of an earlier result (its JSON), to compare again without the head."""
    import json

    saved = json.loads(path.read_text())["real"]
    return Outcome(
        starts=saved["starts"],
        preemptions=[Preempted(**p) for p in saved["preemptions"]],
        ends=saved["ends"],
        unfinished=saved["unfinished"],
    )


def _last_end(outcome: Outcome) -> float:
    return max(outcome.ends.values(), default=0.0)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.replay", description=__doc__.split("\n")[0]
    )
    p.add_argument("--trace", type=Path, required=True, help="the Lublin SWF trace")
    p.add_argument("--start", type=int, default=200, help="skip this many of the trace's jobs")
    p.add_argument("--jobs", type=int, default=60)
    p.add_argument("--seed", type=int, default=1, help="priorities and timeouts, as the simulator")
    p.add_argument("--span", type=float, default=Scale.span, help="seconds of arrivals")
    p.add_argument("--run-factor", type=float, default=Scale.run_factor)
    p.add_argument("--grace", type=float, default=3.0, help="gracePeriodSeconds of both queues")
    p.add_argument("--sim-only", action="store_true", help="the simulator's side only (seconds)")
    p.add_argument(
        "--real-from", type=Path, default=None, help="compare with the real side of this JSON"
    )
    p.add_argument("--out", type=Path, default=None, help="the JSON result (default results/)")
    args = p.parse_args(argv)
    if not args.trace.is_file():
        print(f"no trace at {args.trace}")
        return 2
    how = Scale(span=args.span, run_factor=args.run_factor)
    jobs = trace_slice(args.trace, start=args.start, count=args.jobs, seed=args.seed, how=how)
    text = queue_file(grace=args.grace)
    sim = simulated(jobs, parse_queues(text))
    extra: dict[str, Any] = {}
    if args.sim_only:
        real_side = Outcome()
    elif args.real_from is not None:
        real_side = load_real(args.real_from)
    else:
        with tempfile.TemporaryDirectory(prefix="rq-replay-") as tmp:
            real_side, extra = real(jobs, text, Path(tmp))
    comparison = compare(jobs, sim, real_side)
    print(render(comparison))
    print(f"last end: sim {_last_end(sim):.0f} s, real {_last_end(real_side):.0f} s")
    if sim.unfinished or real_side.unfinished:
        print(f"unfinished: sim {sim.unfinished}, real {real_side.unfinished}")
    preempted = {p.victim for p in real_side.preemptions}
    overhead = run_overhead(jobs, real_side, preempted)
    again = simulated(with_overhead(jobs, overhead), parse_queues(text))
    adjusted = compare(jobs, again, real_side)
    print(f"\nthe simulator again, each run {overhead:g} s longer (the real runs' median cost):")
    print("\n".join(render(adjusted).split("\n")[len(adjusted.rows) + 3 :]))
    print(f"last end: sim {_last_end(again):.0f} s, real {_last_end(real_side):.0f} s")
    save(
        "replay",
        {
            "command": sys.argv,
            "scale": asdict(how),
            "queues": text,
            "summary": comparison.summary(),
            "overhead": overhead,
            "summary_with_overhead": adjusted.summary(),
            "sim_with_overhead": asdict(again),
            "rows": [asdict(r) for r in comparison.rows],
            "sim": asdict(sim),
            "real": asdict(real_side),
            **extra,
        },
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
