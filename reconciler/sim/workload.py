"""Workloads for the simulator: jobs read from an SWF trace, or drawn by a seeded generator.

Every random draw comes from a `random.Random(seed)` made here, so a seed fixes the workload.
All times are whole seconds, which keeps the virtual clock exact when it becomes a datetime.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

TIMEOUT_FACTOR = (1.0, 5.0)
"""Declared timeoutSeconds = run time x a factor drawn uniformly from this range."""

PRIORITIES = 10
"""Priorities 0..9, drawn uniformly by default: the trace has none, and a uniform draw keeps
every level about equally full, so each level's percentiles rest on as many jobs as the
others'."""

PriorityWeights = tuple[float, ...] | None
"""Relative shares of priorities 0..9 (ten numbers); None: uniform."""


def draw_priority(rng: random.Random, weights: PriorityWeights) -> int:
    # The uniform draw stays randrange (rng.choices draws other numbers), so a seed's default
    # workload stays the same.
    if weights is None:
        return rng.randrange(PRIORITIES)
    return rng.choices(range(PRIORITIES), weights=weights)[0]


@dataclass(frozen=True)
class Job:
    """One task of a workload: when it arrives, what it declares, and how long it really runs."""

    name: str
    arrival: float  # seconds from the start of the workload
    run: float  # actual run time in seconds, once started
    cpu: float
    priority: int
    timeout: float  # declared timeoutSeconds; 0 means none (unbounded)
    resumable: bool = False  # checkpoints on SIGTERM: a preemption loses only the grace period
    # An element of a task array: named `ARRAY[i]`, of an array of `array_size` elements (0: a plain
    # task) with this maxParallel.
    array_size: int = 0
    max_parallel: int | None = None
    # What the job really holds in Ray once it runs (its driver fans out to more workers than
    # it declares, or uses fewer); None: what it declares. The planner never sees it.
    real_cpu: float | None = None

    @property
    def held_cpu(self) -> float:
        """The CPUs Ray really gives the job while it runs."""
        return self.cpu if self.real_cpu is None else self.real_cpu


def make_arrays(
    workload: Sequence[Job], fraction: float, size: int, max_parallel: int | None, seed: int
) -> list[Job]:
    """Each job, with probability `fraction`, becomes an array of `size` elements, each a copy
    of the job (same arrival, run, CPUs, priority, timeout) named `NAME[i]`, capped at
    `max_parallel` (default: `size`, no cap below the array's own size). Drawn from its own
    seeded generator, so the rest of the workload is the same at every fraction."""
    rng = random.Random(f"arrays:{seed}")
    out: list[Job] = []
    for job in workload:
        if size < 1 or rng.random() >= fraction:
            out.append(job)
            continue
        cap = max_parallel or size
        out.extend(
            replace(job, name=f"{job.name}[{i}]", array_size=size, max_parallel=cap)
            for i in range(size)
        )
    return out


def mark_resumable(workload: Sequence[Job], fraction: float, seed: int) -> list[Job]:
    """Each job resumable with probability `fraction`, drawn from its own seeded generator so
    that the rest of the workload (arrivals, sizes, priorities) is the same at every fraction."""
    rng = random.Random(f"resumable:{seed}")
    return [replace(job, resumable=rng.random() < fraction) for job in workload]


@dataclass(frozen=True)
class Misuse:
    """A share of the jobs whose real use is `factor` x what they declare."""

    fraction: float
    factor: float


def mark_real_use(
    workload: Sequence[Job],
    overuse: Misuse | None,
    underuse: Misuse | None,
    capacity_cpu: float,
    seed: int,
) -> list[Job]:
    """Each job, with probability `overuse.fraction`, really holds `overuse.factor` x its CPUs;
    else, with probability `underuse.fraction`, `underuse.factor` x them; else what it declares.
    One draw a job from its own seeded generator, so the rest of the workload is the same at
    every setting, and the jobs that over-use at a fraction are among those that do at a larger
    one. Real use is capped at `capacity_cpu`: a job cannot hold more than the cluster has."""
    over = overuse or Misuse(0.0, 1.0)
    under = underuse or Misuse(0.0, 1.0)
    if over.fraction + under.fraction > 1 + 1e-9:
        raise ValueError("the over- and under-using fractions add up to more than 1")
    rng = random.Random(f"real-use:{seed}")
    out: list[Job] = []
    for job in workload:
        draw = rng.random()
        if draw < over.fraction:
            factor = over.factor
        elif draw < over.fraction + under.fraction:
            factor = under.factor
        else:
            out.append(job)
            continue
        out.append(replace(job, real_cpu=min(job.cpu * factor, float(capacity_cpu))))
    return out


def declared_timeout(
    run: float, rng: random.Random, factor: tuple[float, float] = TIMEOUT_FACTOR
) -> float:
    """Run time x U[low, high], rounded up so a job always ends within its own bound."""
    return float(math.ceil(run * rng.uniform(*factor)))


def read_swf(
    path: Path,
    *,
    limit: int | None = None,
    seed: int = 0,
    capacity_cpu: int = 256,
    timeout_factor: tuple[float, float] = TIMEOUT_FACTOR,
    priority_weights: PriorityWeights = None,
) -> list[Job]:
    """Jobs from a Standard Workload Format trace: one job a line, ';' starts a header comment.

    Fields used (1-based): 2 submit time, 4 run time, 5 allocated processors (8, requested,
    when 5 is -1). One processor is one CPU. Jobs with no run time or no processors are
    skipped, as are jobs wider than `capacity_cpu`. Arrivals are shifted to start at 0.
    """
    rng = random.Random(seed)
    jobs: list[Job] = []
    first: float | None = None
    with path.open() as lines:
        for line in lines:
            fields = line.split()
            if not fields or fields[0].startswith(";"):
                continue
            submit, run = float(fields[1]), float(fields[3])
            procs = int(fields[4]) if int(fields[4]) > 0 else int(fields[7])
            if run <= 0 or procs <= 0 or procs > capacity_cpu:
                continue
            first = submit if first is None else first
            # Draw in a fixed order per job so a prefix of the trace gets the same values.
            timeout = declared_timeout(run, rng, timeout_factor)
            priority = draw_priority(rng, priority_weights)
            jobs.append(
                Job(f"swf-{int(fields[0]):06d}", submit - first, run, procs, priority, timeout)
            )
            if limit is not None and len(jobs) >= limit:
                break
    return jobs


# Job sizes of the synthetic workload: (share of jobs, smallest CPUs, largest CPUs). Many small
# jobs and a few that need half or all of the cluster: the mix on which strict idles and
# besteffort starves.
SIZE_CLASSES = ((0.50, 1, 1), (0.30, 2, 8), (0.15, 16, 64), (0.05, 128, 256))
RUN_SECONDS = (10.0, 4 * 3600.0)  # log-uniform
SYNTHETIC_LOAD = 0.9


def synthetic(
    count: int,
    *,
    seed: int = 0,
    capacity_cpu: int = 256,
    load: float = SYNTHETIC_LOAD,
    timeout_factor: tuple[float, float] = TIMEOUT_FACTOR,
    priority_weights: PriorityWeights = None,
) -> list[Job]:
    """`count` jobs with Poisson arrivals at a rate that offers `load` x capacity on average.

    Sizes follow SIZE_CLASSES (capped at the capacity), run times are log-uniform in
    RUN_SECONDS, priorities as `priority_weights` say (uniform by default), timeouts as
    for traces.
    """
    rng = random.Random(seed)
    shapes: list[tuple[float, float, int, float]] = []
    for _ in range(count):
        low, high = _pick(rng)
        cpu = float(min(capacity_cpu, _log_uniform_int(rng, low, high)))
        run = float(round(math.exp(rng.uniform(*map(math.log, RUN_SECONDS)))))
        priority = draw_priority(rng, priority_weights)
        shapes.append((cpu, run, priority, declared_timeout(run, rng, timeout_factor)))
    # The arrival rate follows from the drawn jobs, so the offered load is `load` exactly.
    work = sum(cpu * run for cpu, run, _, _ in shapes)
    mean_gap = work / (load * capacity_cpu * max(count, 1))
    jobs = []
    clock = 0.0
    for index, (cpu, run, priority, timeout) in enumerate(shapes):
        jobs.append(Job(f"syn-{index:06d}", float(round(clock)), run, cpu, priority, timeout))
        clock += rng.expovariate(1.0 / mean_gap)
    return jobs


def _pick(rng: random.Random) -> tuple[int, int]:
    draw = rng.random()
    for share, low, high in SIZE_CLASSES:
        if draw < share:
            return low, high
        draw -= share
    return SIZE_CLASSES[-1][1:]


def _log_uniform_int(rng: random.Random, low: int, high: int) -> int:
    return round(math.exp(rng.uniform(math.log(low), math.log(high))))


def offered_load(jobs: list[Job], capacity_cpu: float) -> float:
    """Declared CPU-seconds of the actual runs over capacity x the arrival span."""
    if len(jobs) < 2:
        return 0.0
    span = jobs[-1].arrival - jobs[0].arrival
    return sum(j.cpu * j.run for j in jobs) / (capacity_cpu * span) if span > 0 else 0.0


WIDE_CAPACITY = 128
"""The wide shape's cluster: a machine of 128 processors, as in the public hypercube logs of the
Parallel Workloads Archive (the NASA Ames iPSC/860 one), whose partitions are powers of two."""

WIDE_LOAD = 0.95
"""The wide shape's offered load: close to saturation, where the order of starts matters."""

WIDE_WHOLE_SHARE = 0.03
"""Share of the wide shape's jobs that take the whole cluster: a few, each of which must wait
for every CPU to be free."""

WIDE_SERIAL_SHARE = 0.35
"""Share of one-CPU jobs; the rest of the widths (2 to half the cluster) share what is left,
each power of two WIDE_WIDTH_RATIO times as likely as the one below it."""

WIDE_WIDTH_RATIO = 0.75

WIDE_SHORT_SHARE = 0.6
"""Share of short jobs (WIDE_SHORT_RUN); the others run WIDE_LONG_RUN. Both log-uniform."""

WIDE_SHORT_RUN = (5.0, 600.0)
WIDE_LONG_RUN = (600.0, 6 * 3600.0)


def wide_widths(capacity_cpu: int) -> tuple[tuple[int, float], ...]:
    """(width, share of the jobs) of the wide shape: every power of two up to the capacity."""
    top = max(0, int(math.log2(capacity_cpu)))
    middle = [2**k for k in range(1, top)]
    if top == 0:
        return ((1, 1.0),)
    rest = 1.0 - WIDE_SERIAL_SHARE - WIDE_WHOLE_SHARE
    scale = sum(WIDE_WIDTH_RATIO**k for k in range(len(middle)))
    shares = [rest * WIDE_WIDTH_RATIO**k / scale for k in range(len(middle))]
    serial = WIDE_SERIAL_SHARE + (rest if not middle else 0.0)
    return ((1, serial), *zip(middle, shares, strict=True), (2**top, WIDE_WHOLE_SHARE))


def wide(
    count: int,
    *,
    seed: int = 0,
    capacity_cpu: int = WIDE_CAPACITY,
    load: float = WIDE_LOAD,
    timeout_factor: tuple[float, float] = TIMEOUT_FACTOR,
    priority_weights: PriorityWeights = None,
) -> list[Job]:
    """`count` jobs of the wide shape: widths powers of two up to the cluster (`wide_widths`), a
    majority short, Poisson arrivals then scaled so that the offered load (`offered_load`) is
    `load`. A seed fixes the workload."""
    rng = random.Random(f"wide:{seed}")
    widths, shares = zip(*wide_widths(capacity_cpu), strict=True)
    shapes: list[tuple[float, float, int, float]] = []
    for _ in range(count):
        cpu = float(rng.choices(widths, weights=shares)[0])
        bounds = WIDE_SHORT_RUN if rng.random() < WIDE_SHORT_SHARE else WIDE_LONG_RUN
        run = float(round(math.exp(rng.uniform(*map(math.log, bounds)))))
        priority = draw_priority(rng, priority_weights)
        shapes.append((cpu, run, priority, declared_timeout(run, rng, timeout_factor)))
    gaps = [rng.expovariate(1.0) for _ in range(max(count - 1, 0))]
    # The span from the first arrival to the last that offers `load` of the drawn work.
    work = sum(cpu * run for cpu, run, _, _ in shapes)
    scale = work / (load * capacity_cpu * sum(gaps)) if gaps and sum(gaps) > 0 else 0.0
    jobs = []
    clock = 0.0
    for index, (cpu, run, priority, timeout) in enumerate(shapes):
        jobs.append(Job(f"wide-{index:06d}", float(round(clock)), run, cpu, priority, timeout))
        clock += gaps[index] * scale if index < len(gaps) else 0.0
    return jobs
