"""What the reconciler knows of Ray: plain values and typed errors. No `ray` import here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

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

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True)
class SubmitRequest:
    submission_id: str
    entrypoint: str
    runtime_env: Mapping[str, object] | None
    metadata: Mapping[str, str]


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
