"""What the reconciler knows of Ray: plain values and typed errors. No `ray` import here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, TypeVar, runtime_checkable

_V = TypeVar("_V")

# Ray's job statuses, verbatim.
PENDING = "PENDING"
RUNNING = "RUNNING"
SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
STOPPED = "STOPPED"
TERMINAL_STATUSES = frozenset({SUCCEEDED, FAILED, STOPPED})

# Keys we put into each job's metadata, so our jobs can be told from foreign ones.
META_QUEUE = "rayqueue.queue"
META_TASK = "rayqueue.task"
META_UID = "rayqueue.uid"
META_SPEC_HASH = "rayqueue.specHash"
META_RUN = "rayqueue.run"
META_CPU = "rayqueue.cpu"
META_GPU = "rayqueue.gpu"
META_MEMORY = "rayqueue.memory"
META_REVISION = "rayqueue.revision"  # the git commit the run's spec came from, if any


@dataclass(frozen=True)
class Capacity:
    """Resources as Ray counts them: CPUs, GPUs and bytes of memory."""

    cpu: float = 0.0
    gpu: float = 0.0
    memory: float = 0.0

    def __add__(self, other: Capacity) -> Capacity:
        return Capacity(self.cpu + other.cpu, self.gpu + other.gpu, self.memory + other.memory)

    def __sub__(self, other: Capacity) -> Capacity:
        return Capacity(self.cpu - other.cpu, self.gpu - other.gpu, self.memory - other.memory)

    def fits_in(self, other: Capacity) -> bool:
        eps = 1e-9
        return (
            self.cpu <= other.cpu + eps
            and self.gpu <= other.gpu + eps
            and self.memory <= other.memory + eps
        )


@dataclass(frozen=True)
class NodeType:
    """One kind of node the autoscaler may launch: what one node has, and how many may run."""

    name: str
    resources: Capacity  # of one node
    max_count: int
    min_count: int = 0


@dataclass(frozen=True)
class Scaling:
    """What the cluster can grow to, read from Ray's autoscaler report or from
    configuration. `ceiling` is the whole cluster at its largest (the head and every node type
    at its max); `node_types` may be empty when only a ceiling is configured. `pending` and
    `failures` are the autoscaler's own words: nodes being launched, and recent failed launches
    (a cloud quota or capacity error, verbatim)."""

    ceiling: Capacity
    node_types: tuple[NodeType, ...] = ()
    source: str = "config"  # "autoscaler" | "config"
    pending: tuple[str, ...] = ()  # e.g. ("small-worker",) per node being launched
    failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class RayJob:
    """One Ray job as listed by the dashboard. Times are Unix seconds."""

    submission_id: str
    status: str
    entrypoint: str = ""
    message: str = ""
    start_time: float | None = None
    end_time: float | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    # What the job asked Ray to reserve for its entrypoint (driver); counted for foreign jobs.
    entrypoint_cpus: float = 0.0
    entrypoint_gpus: float = 0.0
    entrypoint_memory: float = 0.0  # bytes
    # The driver's exit code once it has exited by itself (0 for SUCCEEDED); None while it
    # runs, for a stopped job, and when Ray could not start it at all.
    exit_code: int | None = None
    # Ray's own id of the job (hex, e.g. "02000000"), once its driver has started: the key of
    # a Census. None before, and on a Ray that does not list it.
    job_id: str | None = None
    # Where its driver runs, once it has started: the node's id and the driver's pid there
    # (what ties the driver's process to the job in a Census's physical use).
    driver_node_id: str | None = None
    driver_pid: int | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True)
class Usage:
    """What a job's processes use in fact, as the dashboard's node data shows them, summed
    over the job's worker processes and its driver. Processes a worker forks itself are not
    seen."""

    cpu_percent: float = 0.0  # percent of one core: 250 is two and a half cores busy
    memory: float = 0.0  # bytes: resident set minus shared pages (the object store's)
    gpu_memory: float = 0.0  # bytes
    processes: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.cpu_percent + other.cpu_percent,
            self.memory + other.memory,
            self.gpu_memory + other.gpu_memory,
            self.processes + other.processes,
        )


@dataclass(frozen=True)
class Holdings:
    """What one Ray job holds, as Ray's State API counts it: `groups`, the bundles of its
    created placement groups; `actors`, its alive actors outside any group; `tasks`, its
    running tasks outside any group (what runs inside a group is in the group's bundles).
    `complete` is False when a list Ray answered was cut before this job's rows all came: the
    figures are then a lower bound. `usage` is its physical use; None when not read.

    A task blocked in `ray.get` lends its CPU back to its node but still shows as running,
    so `tasks` may count more than the node lends it at that instant."""

    job_id: str
    groups: Capacity = Capacity()
    actors: Capacity = Capacity()
    tasks: Capacity = Capacity()
    complete: bool = True
    usage: Usage | None = None

    @property
    def logical(self) -> Capacity:
        """Everything the job holds in Ray's logical resources."""
        return self.groups + self.actors + self.tasks


@dataclass(frozen=True)
class Available:
    """What Ray reported available across the cluster (`resources`, in its logical
    resources), as of `reported_at` (Unix seconds, the head's clock): Ray's own report is
    made on its own cadence, so it may be older than the census that read it."""

    resources: Capacity
    reported_at: float


def _frozen_map(items: Mapping[str, _V]) -> Mapping[str, _V]:
    return MappingProxyType(dict(items))


@dataclass(frozen=True)
class Census:
    """What every Ray job holds, at one poll of Ray (`taken_at`, Unix seconds).

    `jobs` by Ray's job id (RayJob.job_id), ours and foreign alike, each job that holds
    something. `entrypoints` by submission id: what Ray reserves for each submitted job's
    driver (its `entrypoint_*` resources, held by the job's supervisor actor, which Ray runs
    under the dashboard's own job, so it is not in that job's holdings). `whole`: every list
    Ray answered came whole, so a job not in `jobs` holds nothing; when not whole, such a
    job's holdings are unknown (`of` answers a lower bound of nothing). `physical`: whether
    the physical use was read (each job's `usage`). `available`: what Ray reported available
    across the cluster, read in the same poll; None when Ray did not say. `requests` and
    `bytes_read`: what this poll cost the dashboard."""

    taken_at: float
    jobs: Mapping[str, Holdings] = field(default_factory=lambda: _frozen_map({}))
    entrypoints: Mapping[str, Capacity] = field(default_factory=lambda: _frozen_map({}))
    whole: bool = True
    physical: bool = False
    available: Available | None = None
    requests: int = 0
    bytes_read: int = 0

    def __post_init__(self) -> None:
        # A plain value: nobody changes a census another thread reads.
        object.__setattr__(self, "jobs", _frozen_map(self.jobs))
        object.__setattr__(self, "entrypoints", _frozen_map(self.entrypoints))

    def of(self, job_id: str) -> Holdings:
        """The job's holdings; for a job Ray listed nothing for, nothing held, complete only
        when the census is whole."""
        found = self.jobs.get(job_id)
        if found is not None:
            return found
        return Holdings(job_id, complete=self.whole)

    @property
    def complete(self) -> bool:
        """Every figure is exact: the census is whole and no job's rows were cut."""
        return self.whole and all(h.complete for h in self.jobs.values())


@dataclass(frozen=True)
class SubmitRequest:
    submission_id: str
    entrypoint: str
    runtime_env: Mapping[str, object] | None
    metadata: Mapping[str, str]


# Text cut to a size in bytes: what is left says it was cut.
CUT_MARK = " [... cut]"
CUT_MARK_FRONT = "[cut ...] "
EARLIER_CUT = "[... earlier lines cut]"  # the first line of a log tail that left lines out


def cut_text(text: str, limit: int, *, keep_end: bool = False) -> str:
    """`text` in at most `limit` bytes of UTF-8, marked where it was cut: its start kept, or
    with `keep_end` its end. Text within the limit comes back as it is, so a cut text cut
    again is unchanged."""
    if len(text) * 4 <= limit:  # at most four bytes a character: no need to encode
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    if keep_end:
        room = max(limit - len(CUT_MARK_FRONT), 0)
        return CUT_MARK_FRONT + data[len(data) - room :].decode("utf-8", "ignore")
    room = max(limit - len(CUT_MARK), 0)
    return data[:room].decode("utf-8", "ignore") + CUT_MARK


# The most a reader's own `tail=N` of a log gives (the API's logs route, `rayqueue logs --tail`
# and `describe`): its last N lines, each whole up to this, the earliest dropped past it.
REQUESTED_TAIL_BYTES = 1024 * 1024


@dataclass(frozen=True)
class TailLimits:
    """How much of the end of a job's log to read and keep: its last `lines` lines, each cut
    to `line_bytes`, at most `max_bytes` in all (the earliest of them dropped first)."""

    lines: int
    max_bytes: int
    line_bytes: int

    @classmethod
    def requested(cls, lines: int) -> TailLimits:
        """A reader's `tail=lines`: lines cut only by REQUESTED_TAIL_BYTES."""
        return cls(lines, REQUESTED_TAIL_BYTES, REQUESTED_TAIL_BYTES)

    @property
    def read_budget(self) -> int:
        """The most one read of a log's end may carry from Ray: lines longer than
        `line_bytes` are cut after the read, so it holds more than `max_bytes`."""
        return 4 * self.max_bytes

    def shape(self, text: str, *, whole: bool = True, earlier_cut: bool = False) -> str:
        """The tail kept of `text`, the last lines of a log. `whole`: `text` runs to the
        end of the log; otherwise the read stopped at its budget inside the last line,
        which is marked as cut. `earlier_cut`: lines before `text` were left out for their
        size, said by a first line EARLIER_CUT."""
        if self.lines <= 0:
            return ""
        kept = text.rstrip("\n").splitlines()[-self.lines :]
        if not kept:
            return ""
        if earlier_cut:
            shorter = TailLimits(self.lines, self.max_bytes - len(EARLIER_CUT) - 1, self.line_bytes)
            return EARLIER_CUT + "\n" + shorter.shape(text, whole=whole)
        if not whole:  # the read stopped inside the last line: it is cut, and says so
            last = cut_text(kept[-1], self.line_bytes)
            if last is kept[-1]:
                last = cut_text(last, self.line_bytes - len(CUT_MARK))
                last = last if last.endswith(CUT_MARK) else last + CUT_MARK
            kept[-1] = last
        kept = [cut_text(line, self.line_bytes) for line in kept]
        size = sum(len(line.encode("utf-8", "surrogatepass")) + 1 for line in kept) - 1
        while size > self.max_bytes and len(kept) > 1:
            size -= len(kept.pop(0).encode("utf-8", "surrogatepass")) + 1
        return cut_text(kept[0], self.max_bytes) if size > self.max_bytes else "\n".join(kept)


class RayError(Exception):
    """Base of everything the Ray adapter raises."""


class RayUnavailable(RayError):
    """The dashboard could not be reached or timed out; worth retrying with backoff."""


class JobNotFound(RayError):
    """Ray has no job with this submission id."""


class JobConflict(RayError):
    """A job with this submission id already exists (Ray rejects reused ids)."""


class RayRequestError(RayError):
    """Ray answered, but refused the request for another reason (bad runtime_env, ...)."""


class CensusUnsupported(RayError):
    """This Ray cannot say what its jobs hold (an older Ray, a dashboard without the state
    API): the queue goes on counting what specs declare."""


class RayAdapter(Protocol):
    """The reconciler's whole view of a Ray cluster. Every call has a timeout."""

    def list_jobs(self) -> Sequence[RayJob]:
        """All jobs with a submission id, in one call."""
        ...

    def capacity(self) -> Capacity:
        """Sum of total CPU, GPU and memory over alive nodes, in one call."""
        ...

    def submit(self, request: SubmitRequest) -> None:
        """Submit a job. Raises JobConflict if the id exists already."""
        ...

    def stop(self, submission_id: str) -> None:
        """Ask Ray to stop a job. Succeeds if the job has already ended; JobNotFound if absent."""
        ...

    def delete(self, submission_id: str) -> None:
        """Remove a finished job from Ray's history. JobNotFound if absent."""
        ...

    def logs(self, submission_id: str) -> str:
        """The job's whole log so far. JobNotFound if absent."""
        ...

    def job_info(self, submission_id: str) -> RayJob:
        """The one job, as the listing shows it (its metadata: whose run it is). JobNotFound
        if absent."""
        ...

    def log_tail(self, submission_id: str, limits: TailLimits) -> str:
        """The end of the job's log within `limits` (TailLimits.shape), read from Ray in at
        most a few reads of `limits.read_budget` bytes each, never the whole log.
        JobNotFound if absent."""
        ...


class Autoscaler(Protocol):
    """Ray's autoscaler as rayqueue sees it. The shell polls `scaling()` beside the
    capacity read and, after each pass whose plan has a `scale_request`, calls `request()`."""

    def scaling(self) -> Scaling | None:
        """The autoscaler's node types, max counts, pending launches and failures; None when
        the cluster does not autoscale (no autoscaler report)."""
        ...

    def request(self, bundles: Sequence[Capacity]) -> None:
        """Replace the standing resource request with `bundles` (empty: clear it)."""
        ...


@runtime_checkable
class CensusReader(Protocol):
    """Where a census comes from: the real adapter (through
    reconciler/shell/raycluster/census.py) or the fake one. A census is read off the loop's
    path, on its own cadence (reconciler/shell/ops/census.py)."""

    def take_census(self, drivers: Mapping[tuple[str, int], str] | None = None) -> Census:
        """What every job holds now, in a few reads. `drivers`: the Ray job id of each
        driver process, by its node's id and its pid (RayJob.driver_node_id, driver_pid), so
        that a driver's physical use counts for its job. Raises CensusUnsupported when this
        Ray cannot say, RayUnavailable when it does not answer."""
        ...
