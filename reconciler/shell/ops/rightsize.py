"""Right-sizing: what each run held and used while it lived, and the `resources:` block the
runs of a task suggest.

`RunUse` is the one small aggregate a live run keeps, fed by each census that sees its Ray
job: the peak and the time-weighted mean of the logical resources it holds, the mean of the
cores its processes keep busy, and the peaks of its memory (resident less shared) and GPU
memory. A census's value holds until the next one (a step function), at most `hold_seconds`,
beyond which nothing was seen. When the run ends it becomes a `RunRecord`, its efficiency as
Slurm's `seff` reports it: CPU efficiency is the CPU-seconds used over declared CPUs times
wall time.

`suggest` reads the records of a task (or of every element of an array) into a suggested
`resources:` block. Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specs.cluster import Capacity, Usage, cut_text
from specs.task.arrays import split
from specs.task.quantity import format_memory, human_memory

# The most bytes any text field of a record holds (a task name, a queue, an id, an outcome).
FIELD_BYTES = 512
GI = 2**30
MI = 2**20


@dataclass
class RunUse:
    """What one live run was seen holding and using, over the censuses that saw it. Kept
    small: a fixed set of numbers per run, whatever the number of polls."""

    hold_seconds: float = math.inf
    polls: int = 0
    lower_bound: bool = False
    first_at: float | None = None
    last_at: float | None = None
    peak: Capacity = field(default_factory=Capacity)
    # The integral over time of what was held (resource-seconds) and the seconds it covers.
    held_seconds: Capacity = field(default_factory=Capacity)
    covered: float = 0.0
    last: Capacity = field(default_factory=Capacity)
    # Physical use, where the census read it: core-seconds busy over the seconds covered.
    core_seconds: float = 0.0
    physical_covered: float = 0.0
    last_cores: float | None = None
    peak_memory: float | None = None
    peak_gpu_memory: float | None = None

    def observe(self, at: float, held: Capacity, usage: Usage | None, *, complete: bool) -> None:
        """One census's figures for the run, taken at `at` (Unix seconds). `complete`: False
        when the census could only give a lower bound of what the run holds."""
        if self.last_at is not None and at <= self.last_at:
            return  # the same census again, or one older than the last seen
        self._close(at)
        self.polls += 1
        self.lower_bound = self.lower_bound or not complete
        self.first_at = at if self.first_at is None else self.first_at
        self.last_at = at
        self.last = held
        self.peak = Capacity(
            max(self.peak.cpu, held.cpu),
            max(self.peak.gpu, held.gpu),
            max(self.peak.memory, held.memory),
        )
        if usage is None:
            self.last_cores = None
            return
        self.last_cores = usage.cpu_percent / 100.0
        self.peak_memory = max(self.peak_memory or 0.0, usage.memory)
        self.peak_gpu_memory = max(self.peak_gpu_memory or 0.0, usage.gpu_memory)

    def _close(self, until: float) -> None:
        """The last census's figures held from its time to `until` (at most hold_seconds)."""
        if self.last_at is None:
            return
        span = min(max(until - self.last_at, 0.0), self.hold_seconds)
        if span <= 0:
            return
        self.held_seconds += Capacity(
            self.last.cpu * span, self.last.gpu * span, self.last.memory * span
        )
        self.covered += span
        if self.last_cores is not None:
            self.core_seconds += self.last_cores * span
            self.physical_covered += span

    @property
    def mean(self) -> Capacity:
        """The time-weighted mean of what was held; the one figure seen, when no time passed
        between the polls."""
        if self.covered <= 0:
            return self.last
        c = self.held_seconds
        return Capacity(c.cpu / self.covered, c.gpu / self.covered, c.memory / self.covered)

    @property
    def mean_cores(self) -> float | None:
        """The time-weighted mean of the cores its processes kept busy; None if never read."""
        if self.physical_covered > 0:
            return self.core_seconds / self.physical_covered
        return self.last_cores

    def record(self, run: RunIdentity, ended_at: float | None) -> RunRecord:
        """The run's efficiency record, the last census's figures held until `ended_at`."""
        if ended_at is not None:
            self._close(ended_at)
            self.last_at = max(self.last_at or ended_at, ended_at)
        started = run.started_at if run.started_at is not None else self.first_at
        wall = (
            ended_at - started
            if ended_at is not None and started is not None and ended_at > started
            else None
        )
        cores = self.mean_cores
        cpu_seconds = cores * wall if cores is not None and wall is not None else None
        efficiency = (
            cores / run.declared.cpu if cores is not None and run.declared.cpu > 0 else None
        )
        return RunRecord(
            task=run.task,
            run=run.run,
            submission_id=run.submission_id,
            queue=run.queue,
            outcome=run.outcome,
            started_at=started,
            ended_at=ended_at,
            declared=run.declared,
            peak=self.peak,
            mean=self.mean,
            cpu_seconds=cpu_seconds,
            cpu_efficiency=efficiency,
            peak_memory=self.peak_memory,
            peak_gpu_memory=self.peak_gpu_memory,
            polls=self.polls,
            lower_bound=self.lower_bound,
        )


@dataclass(frozen=True)
class RunIdentity:
    """Whose run a RunUse measured: its task, run number and Ray submission id, its team
    queue (from the loop's status), what its spec declared, its Ray status at the end, and
    when Ray started it (Unix seconds)."""

    task: str
    run: int
    submission_id: str
    queue: str | None
    declared: Capacity
    outcome: str = ""
    started_at: float | None = None


@dataclass(frozen=True)
class RunRecord:
    """One ended run's efficiency: declared against the peak and the time-weighted mean of
    what it held (Ray's logical resources), its CPU efficiency (`cpu_seconds` over declared
    CPUs times its wall time), its peak memory (resident less shared) and GPU memory (bytes;
    None where physical use was not read), the censuses that saw it, and whether any of them
    could only give a lower bound."""

    task: str
    run: int
    submission_id: str
    queue: str | None
    outcome: str
    started_at: float | None
    ended_at: float | None
    declared: Capacity
    peak: Capacity
    mean: Capacity
    cpu_seconds: float | None
    cpu_efficiency: float | None
    peak_memory: float | None
    peak_gpu_memory: float | None
    polls: int
    lower_bound: bool

    @property
    def busy_cores(self) -> float | None:
        """The cores its processes kept busy on average: its CPU-seconds over its wall time."""
        if self.cpu_seconds is None or self.started_at is None or self.ended_at is None:
            return None
        wall = self.ended_at - self.started_at
        return self.cpu_seconds / wall if wall > 0 else None

    @property
    def family(self) -> str:
        """What a suggestion is made for: the array, for an element; else the task."""
        parts = split(self.task)
        return parts[0] if parts is not None else self.task

    def to_json(self) -> dict[str, Any]:
        """The record as a history line holds it: every text field cut to FIELD_BYTES."""
        return {
            "task": cut_text(self.task, FIELD_BYTES),
            "run": self.run,
            "submissionId": cut_text(self.submission_id, FIELD_BYTES),
            "queue": None if self.queue is None else cut_text(self.queue, FIELD_BYTES),
            "outcome": cut_text(self.outcome, FIELD_BYTES),
            "startedAt": _rounded(self.started_at),
            "endedAt": _rounded(self.ended_at),
            "declared": _amounts(self.declared),
            "peak": _amounts(self.peak),
            "mean": _amounts(self.mean),
            "cpuSeconds": _rounded(self.cpu_seconds),
            "cpuEfficiency": _rounded(self.cpu_efficiency),
            "peakMemory": _rounded(self.peak_memory, 0),
            "peakGpuMemory": _rounded(self.peak_gpu_memory, 0),
            "polls": self.polls,
            "lowerBound": self.lower_bound,
        }

    @classmethod
    def from_json(cls, data: object) -> RunRecord | None:
        """A history line's record; None for a line that is not one."""
        if not isinstance(data, dict):
            return None
        task, sid = data.get("task"), data.get("submissionId")
        run, polls = data.get("run"), data.get("polls")
        if not isinstance(task, str) or not isinstance(sid, str):
            return None
        if not isinstance(run, int) or not isinstance(polls, int):
            return None
        queue = data.get("queue")
        outcome = data.get("outcome")
        return cls(
            task=task,
            run=run,
            submission_id=sid,
            queue=queue if isinstance(queue, str) else None,
            outcome=outcome if isinstance(outcome, str) else "",
            started_at=_number(data.get("startedAt")),
            ended_at=_number(data.get("endedAt")),
            declared=_capacity(data.get("declared")),
            peak=_capacity(data.get("peak")),
            mean=_capacity(data.get("mean")),
            cpu_seconds=_number(data.get("cpuSeconds")),
            cpu_efficiency=_number(data.get("cpuEfficiency")),
            peak_memory=_number(data.get("peakMemory")),
            peak_gpu_memory=_number(data.get("peakGpuMemory")),
            polls=polls,
            lower_bound=data.get("lowerBound") is True,
        )

    def summary(self) -> str:
        """One line, as `seff` would say it: held against declared, CPU efficiency, memory."""
        parts = [
            f"run {self.run}: held peak {_cpu(self.peak.cpu)} CPU (mean {_cpu(self.mean.cpu)}) "
            f"of {_cpu(self.declared.cpu)} declared"
        ]
        if self.cpu_efficiency is not None:
            parts.append(f"CPU efficiency {self.cpu_efficiency * 100:.0f}%")
        if self.peak_memory is not None:
            parts.append(f"peak memory {human_memory(self.peak_memory)}")
        parts.append(f"{self.polls} polls" + (", a lower bound" if self.lower_bound else ""))
        return ", ".join(parts)


@dataclass(frozen=True)
class SuggestRule:
    """When and how the records of a task suggest its resources: over its last `runs`
    records that are not lower bounds, once there are `min_runs` of them and `min_polls`
    censuses saw them in all. CPUs: the peak held or the most cores a run kept busy on
    average, rounded up to a whole CPU (never below a fractional declaration one would
    round up past); GPUs: the peak held; memory: the peak resident memory times `headroom`
    (or the peak logical memory held, if more), rounded up to 256Mi below 4Gi and to whole
    Gi above."""

    runs: int = 10
    min_runs: int = 1
    min_polls: int = 3
    headroom: float = 1.2


@dataclass(frozen=True)
class Suggestion:
    """A suggested `resources:` block for `name` (a task or an array), from `runs` records
    and `polls` censuses. `memory` None: nothing measured memory; the declaration stands."""

    name: str
    cpu: float
    gpu: float
    memory: int | None
    runs: int
    polls: int

    def changes(self, declared: Capacity) -> dict[str, Any]:
        """The `resources:` keys whose value the suggestion changes (memory as `2Gi`)."""
        out: dict[str, Any] = {}
        if not math.isclose(self.cpu, declared.cpu):
            out["cpu"] = _plain_number(self.cpu)
        if not math.isclose(self.gpu, declared.gpu):
            out["gpu"] = _plain_number(self.gpu)
        if self.memory is not None and self.memory != int(declared.memory):
            out["memory"] = format_memory(self.memory)
        return out

    def words(self) -> str:
        memory = "as declared" if self.memory is None else format_memory(self.memory)
        return (
            f"cpu {_cpu(self.cpu)}, gpu {_cpu(self.gpu)}, memory {memory} "
            f"(from {self.runs} run{'s' if self.runs != 1 else ''}, {self.polls} polls)"
        )


def suggest(
    name: str, records: Iterable[RunRecord], declared: Capacity, rule: SuggestRule = SuggestRule()
) -> Suggestion | None:
    """What the records of `name` (oldest first) suggest; None while there are too few."""
    kept = [r for r in records if not r.lower_bound and r.polls > 0][-rule.runs :]
    polls = sum(r.polls for r in kept)
    if len(kept) < max(rule.min_runs, 1) or polls < rule.min_polls:
        return None
    busiest = max(max(r.peak.cpu for r in kept), max((r.busy_cores or 0.0) for r in kept))
    cpu = float(math.ceil(busiest - 1e-9))
    if 0 < declared.cpu < 1 and busiest <= declared.cpu:
        cpu = declared.cpu  # a fractional declaration that held: rounding up would grow it
    gpu = max(r.peak.gpu for r in kept)
    resident = [r.peak_memory for r in kept if r.peak_memory is not None]
    wanted = max(max(resident, default=0.0) * rule.headroom, max(r.peak.memory for r in kept))
    memory = _round_memory(wanted) if resident or wanted > 0 else None
    return Suggestion(name, cpu, gpu, memory, len(kept), polls)


def families(records: Iterable[RunRecord]) -> dict[str, list[RunRecord]]:
    """Records by what a suggestion is made for (an array's elements together), in order."""
    out: dict[str, list[RunRecord]] = {}
    for record in records:
        out.setdefault(record.family, []).append(record)
    return out


def _round_memory(num_bytes: float) -> int:
    unit = 256 * MI if num_bytes < 4 * GI else GI
    return max(math.ceil(num_bytes / unit - 1e-9), 1) * unit


def _plain_number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _cpu(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") or "0"


def _amounts(value: Capacity) -> dict[str, float]:
    return {
        "cpu": round(value.cpu, 4),
        "gpu": round(value.gpu, 4),
        "memory": round(value.memory),
    }


def _rounded(value: float | None, digits: int = 4) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits) if digits else float(round(value))


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _capacity(value: object) -> Capacity:
    source: Mapping[str, object] = value if isinstance(value, dict) else {}
    return Capacity(
        _number(source.get("cpu")) or 0.0,
        _number(source.get("gpu")) or 0.0,
        _number(source.get("memory")) or 0.0,
    )
