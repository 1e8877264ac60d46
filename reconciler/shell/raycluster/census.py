"""What every Ray job holds, read from the dashboard into a `specs.cluster.Census`.

Logical holdings come from Ray's State API, three lists filtered by state where Ray keeps
them (the GCS filters actors and tasks by state before it caps a list; placement groups are
filtered by the dashboard):
- `/api/v0/placement_groups`, state CREATED: each group's bundles, by `creator_job_id`;
- `/api/v0/actors`, state ALIVE: each actor outside a group, by `job_id`;
- `/api/v0/tasks`, state RUNNING, type NORMAL_TASK: each task outside a group, by `job_id`
  (what an actor's methods use is the actor's; what runs inside a group is in its bundles).
A job's supervisor actor (`_ray_internal_job_actor_<submission id>`) holds the job's
`entrypoint_*` resources under the dashboard's own job: it is recorded per submission id,
apart from every job's holdings.

A list Ray cut (at its `limit`, at its data source's cap, or a task list missing events Ray
dropped) is read again job by job for the jobs it names, each read filtered by job id, one
after another, at most `job_reads` of them per census; a job whose own list is cut too, or
that was not read again, is marked a lower bound (`Holdings.complete`), and the census is
not `whole` (a job the cut list left out entirely is unknown).

Physical use comes from the dashboard's node data: the alive nodes (one state API list),
then one GET per node (`/nodes/<id>`: its worker processes with their job, CPU percent,
resident and shared memory, GPU memory), summed per job. The dashboard refreshes these
figures every few seconds from its own cache; reading them costs the GCS nothing.

What Ray reports available across the cluster is read in the same census, after the three
lists (so what they show held was held when it was reported): one GET of
`/api/cluster_status`, whose load report gives each resource's use and total as Ray's
monitor last reported them (on its own cadence of a few seconds), with the report's time.
A dashboard without it leaves the census without `available`.

Every read is a GET over this module's own kept-alive connections (poll.py), never the
loop's. This module does not import Ray.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from reconciler.shell.raycluster.poll import HTTPStatus, KeptAliveGets, Unreachable
from specs.cluster import (
    Available,
    Capacity,
    Census,
    CensusUnsupported,
    Holdings,
    RayRequestError,
    RayUnavailable,
    Usage,
)

# Ray caps a list at 10,000 rows, at the API server and at its data source.
STATE_LIMIT = 10_000
# Lists read again job by job, at most this many reads per census, one after another.
JOB_READS = 8
# Nodes whose data is read at once, a connection each.
NODES_AT_ONCE = 8
# Ray names each job's supervisor actor after the submission id (JOB_ACTOR_NAME_TEMPLATE).
SUPERVISOR_PREFIX = "_ray_internal_job_actor_"
# The job ids the dashboard gives a worker process it has not tied to a job (its core worker
# stats not read yet, or not at all): such a process is tied to its job by its pid instead.
_NO_JOB = frozenset({"", "ffff", "ffffffff"})
_MB = 2**20


# What the census reads of each row; the rest is dropped as an answer is decoded, so that one
# answer of 10,000 task rows (each with its events, profiling data and runtime env) is not
# held whole. A row is known by the keys only its kind has.
_TASK_KEYS = (
    "job_id",
    "type",
    "state",
    "required_resources",
    "placement_group_id",
    "node_id",
    "worker_pid",
)
_ACTOR_KEYS = (
    "job_id",
    "state",
    "name",
    "required_resources",
    "placement_group_id",
    "node_id",
    "pid",
)
_GROUP_KEYS = ("creator_job_id", "state", "bundles")
_PROCESS_KEYS = ("pid", "jobId", "cpuPercent", "memoryInfo", "gpuMemoryUsage")


def _trimmed(row: dict[str, Any]) -> dict[str, Any]:
    """One decoded JSON object, cut to what the census reads if it is a row it reads."""
    keys: tuple[str, ...]
    if "task_id" in row:
        keys = _TASK_KEYS
    elif "actor_id" in row and "class_name" in row:
        keys = _ACTOR_KEYS
    elif "bundles" in row and "creator_job_id" in row:
        keys = _GROUP_KEYS
    elif "cmdline" in row and "pid" in row:
        keys = _PROCESS_KEYS
    else:
        return row
    return {key: row[key] for key in keys if key in row}


def decode(body: bytes) -> Any:
    """An answer's JSON with each row cut to what the census reads."""
    return json.loads(body, object_hook=_trimmed)


def _equals(key: str, value: str) -> str:
    """A State API filter `key = value`, as query parameters."""
    return f"&filter_keys={key}&filter_predicates=%3D&filter_values={quote(value, safe='')}"


@dataclass(frozen=True)
class Kind:
    """One of the three lists: where it is read, how it is filtered and by which key a
    job's own rows are asked for."""

    name: str  # "groups" | "actors" | "tasks"
    path: str
    filters: str
    job_key: str


GROUPS = Kind("groups", "/api/v0/placement_groups", _equals("state", "CREATED"), "creator_job_id")
ACTORS = Kind("actors", "/api/v0/actors", _equals("state", "ALIVE"), "job_id")
TASKS = Kind(
    "tasks",
    "/api/v0/tasks",
    _equals("state", "RUNNING") + _equals("type", "NORMAL_TASK"),
    "job_id",
)
KINDS = (GROUPS, ACTORS, TASKS)


@dataclass(frozen=True)
class Rows:
    """One answer of the State API: its rows, and whether Ray left some out."""

    rows: list[dict[str, Any]]
    cut: bool


def read_rows(payload: Any, *, what: str, capped: bool = False) -> Rows:
    """The rows of a State API list answer, and whether it was cut: fewer rows than matched
    (`num_filtered`, at the request's `limit`) or fewer than the data source holds (`total`
    above `num_after_truncation`: its cap, or task events Ray dropped). `capped`: the data
    source cuts this list at STATE_LIMIT without saying so (tasks), so a list that reached
    it counts as cut. RayRequestError for an answer of another shape or one that says it
    failed."""
    if not isinstance(payload, dict) or not payload.get("result", False):
        message = payload.get("msg", "") if isinstance(payload, dict) else ""
        raise RayRequestError(f"{what}: the state API refused: {message}")
    try:
        body = payload["data"]["result"]
        rows = body["result"]
        if not isinstance(rows, list):
            raise TypeError("rows are not a list")
        total = int(body.get("total") or 0)
        after = int(body.get("num_after_truncation") or 0)
        matched = int(body.get("num_filtered") or 0)
    except (KeyError, TypeError, ValueError) as exc:
        raise RayRequestError(f"{what}: unexpected state API answer") from exc
    cut = matched > len(rows) or total > after or (capped and after >= STATE_LIMIT)
    return Rows([row for row in rows if isinstance(row, dict)], cut)


def _number(value: object) -> float:
    """A resource figure as Ray writes it (a number, or a number in a string); absent or
    odd values count as nothing. Plain type checks: this runs for every row of a census."""
    if isinstance(value, float | int) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return 0.0
    else:
        return 0.0
    return number if math.isfinite(number) and number > 0 else 0.0


def capacity_of(resources: object) -> Capacity:
    """Ray's resource dict (`CPU`, `GPU`, `memory` in bytes) as a Capacity; other resources
    (custom ones, a group's own `CPU_group_...` names) are left out."""
    if not isinstance(resources, dict):
        return Capacity()
    return Capacity(
        _number(resources.get("CPU")),
        _number(resources.get("GPU")),
        _number(resources.get("memory")),
    )


def _job(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    return value if isinstance(value, str) else ""


# A process of the cluster: its node's id and its pid on that node.
Process = tuple[str, int]


@dataclass
class Sums:
    """Capacity summed by job id, what the supervisor actors reserve by submission id, and
    the job of each worker process the rows name (an actor's `pid`, a task's `worker_pid`),
    to tie the dashboard's per-process figures to jobs."""

    by_job: dict[str, Capacity] = field(default_factory=dict)
    entrypoints: dict[str, Capacity] = field(default_factory=dict)
    pids: dict[Process, str] = field(default_factory=dict)

    def add(self, job: str, amount: Capacity) -> None:
        if job:
            self.by_job[job] = self.by_job.get(job, Capacity()) + amount


def fold(kind: Kind, rows: Iterable[Mapping[str, Any]]) -> Sums:
    """What the rows of one list hold, by job."""
    sums = Sums()
    for row in rows:
        pid = row.get("worker_pid" if kind is TASKS else "pid")
        job = _job(row, "job_id")
        if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and job:
            node = row.get("node_id")
            if isinstance(node, str) and node:
                sums.pids[(node, pid)] = job
        if kind is GROUPS:
            if row.get("state") not in (None, "CREATED"):
                continue
            total = Capacity()
            for bundle in row.get("bundles") or ():
                if isinstance(bundle, dict):
                    total += capacity_of(bundle.get("unit_resources"))
            sums.add(_job(row, "creator_job_id"), total)
            continue
        if row.get("placement_group_id"):
            continue  # held inside a group: counted with its bundles
        amount = capacity_of(row.get("required_resources"))
        if kind is ACTORS:
            if row.get("state") not in (None, "ALIVE"):
                continue
            name = row.get("name")
            if isinstance(name, str) and name.startswith(SUPERVISOR_PREFIX):
                sid = name.removeprefix(SUPERVISOR_PREFIX)
                sums.entrypoints[sid] = sums.entrypoints.get(sid, Capacity()) + amount
                continue
        elif row.get("state") not in (None, "RUNNING") or row.get("type") not in (
            None,
            "NORMAL_TASK",
        ):
            continue
        sums.add(_job(row, "job_id"), amount)
    return sums


def available_of(payload: Any) -> Available | None:
    """What Ray reports available across the cluster, from GET /api/cluster_status: its load
    report's `usage`, each resource as [used, total], and the report's `time`; None when the
    answer has no such report."""
    data = payload.get("data") if isinstance(payload, dict) else None
    status = data.get("clusterStatus") if isinstance(data, dict) else None
    report = status.get("loadMetricsReport") if isinstance(status, dict) else None
    usage = report.get("usage") if isinstance(report, dict) else None
    reported_at = status.get("time") if isinstance(status, dict) else None
    if not isinstance(usage, dict) or not isinstance(reported_at, float | int):
        return None
    if "CPU" not in usage:
        # A head's first reports come before its node's resources do: an empty usage is no
        # report yet, not a cluster with nothing free. A resource Ray has none of (GPU on a
        # CPU cluster) is left out of a real report, and is 0.
        return None

    def free(name: str) -> float:
        pair = usage.get(name)
        if not isinstance(pair, list) or len(pair) != 2:
            return 0.0
        return max(_number(pair[1]) - _number(pair[0]), 0.0)

    return Available(Capacity(free("CPU"), free("GPU"), free("memory")), float(reported_at))


def usage_by_job(node: Any, node_id: str, pids: Mapping[Process, str]) -> dict[str, Usage] | None:
    """The physical use of each job's worker processes on one node (GET /nodes/<id>), each
    process tied to its job by the dashboard's `jobId`, else by its pid in `pids`; None when
    the answer carries no worker data. `memory` is the resident set less the shared pages
    where the dashboard reports them."""
    if not isinstance(node, dict) or not node.get("result", False):
        return None
    detail = (node.get("data") or {}).get("detail")
    workers = detail.get("workers") if isinstance(detail, dict) else None
    if not isinstance(workers, list):
        return None
    found: dict[str, Usage] = {}
    for worker in workers:
        if not isinstance(worker, dict):
            continue
        job = worker.get("jobId")
        if not isinstance(job, str) or job.lower() in _NO_JOB:
            pid = worker.get("pid")
            job = pids.get((node_id, pid)) if isinstance(pid, int) else None
            if job is None:
                continue
        memory = worker.get("memoryInfo") or {}
        resident = _number(memory.get("rss")) if isinstance(memory, dict) else 0.0
        shared = _number(memory.get("shared")) if isinstance(memory, dict) else 0.0
        use = Usage(
            cpu_percent=_number(worker.get("cpuPercent")),
            memory=max(resident - shared, 0.0),
            gpu_memory=_number(worker.get("gpuMemoryUsage")) * _MB,
            processes=1,
        )
        found[job] = found.get(job, Usage()) + use
    return found


@dataclass
class _Kept:
    """One job's holdings as the census builds them: each kind's sum, and the kinds whose
    rows may be missing."""

    held: dict[str, Capacity] = field(default_factory=dict)
    partial: set[str] = field(default_factory=set)


def assemble(
    taken_at: float,
    sums: Mapping[str, Sums],
    cut: Mapping[str, set[str] | None],
    usage: Mapping[str, Usage] | None,
    *,
    available: Available | None = None,
    requests: int = 0,
    bytes_read: int = 0,
) -> Census:
    """The census from each kind's sums. `cut[kind]`: None when the kind's list came whole,
    else the jobs whose rows in it may be missing (those not read again whole)."""
    jobs: dict[str, _Kept] = {}
    for kind in KINDS:
        for job, amount in sums[kind.name].by_job.items():
            jobs.setdefault(job, _Kept()).held[kind.name] = amount
        for job in cut[kind.name] or ():
            jobs.setdefault(job, _Kept()).partial.add(kind.name)
    if usage is not None:
        for job in usage:
            jobs.setdefault(job, _Kept())
    holdings = {
        job: Holdings(
            job,
            groups=kept.held.get(GROUPS.name, Capacity()),
            actors=kept.held.get(ACTORS.name, Capacity()),
            tasks=kept.held.get(TASKS.name, Capacity()),
            complete=not kept.partial,
            usage=None if usage is None else usage.get(job, Usage()),
        )
        for job, kept in sorted(jobs.items())
    }
    return Census(
        taken_at,
        holdings,
        sums[ACTORS.name].entrypoints,
        whole=all(cut[kind.name] is None for kind in KINDS),
        physical=usage is not None,
        available=available,
        requests=requests,
        bytes_read=bytes_read,
    )


class RayCensus:
    """specs.cluster.CensusReader over a Ray dashboard address.

    A census is three list reads (sent together), the job-by-job reads of a cut list, and,
    with `physical`, one node list and one read per alive node. Not for the loop's thread:
    a census may take seconds on a big cluster."""

    def __init__(
        self,
        address: str,
        *,
        timeout_seconds: float = 10.0,
        headers: dict[str, str] | None = None,
        limit: int = STATE_LIMIT,
        job_reads: int = JOB_READS,
        physical: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if "://" not in address:
            address = f"http://{address}"
        self.address = address.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self.limit = max(1, min(limit, STATE_LIMIT))
        self.job_reads = max(0, job_reads)
        self.physical = physical
        self.clock = clock
        self._gets = KeptAliveGets(
            self.address,
            timeout_seconds=timeout_seconds,
            headers=dict(headers or {}),
            width=max(len(KINDS), NODES_AT_ONCE),
            decode=decode,
        )
        self._timeout_param = f"&timeout={max(1, math.ceil(timeout_seconds))}"

    def __repr__(self) -> str:
        return f"RayCensus({self.address!r})"

    def close(self) -> None:
        self._gets.close()

    def take_census(self, drivers: Mapping[Process, str] | None = None) -> Census:
        taken_at = self.clock()
        requests, bytes_read = self._gets.requests, self._gets.bytes_read
        sums: dict[str, Sums] = {}
        cut: dict[str, set[str] | None] = {}
        reads_left = self.job_reads
        # One list at a time, each folded into sums before the next is read: what a census
        # keeps in memory is one answer and the sums, whatever the cluster runs.
        for kind in KINDS:
            answer = self._get(self._endpoint(kind), f"list {kind.name}")
            if isinstance(answer, HTTPStatus):
                if answer.status == 404:
                    raise CensusUnsupported(
                        f"the Ray dashboard at {self.address} has no state API ({kind.path})"
                    )
                raise _error(answer, f"list {kind.name}")
            rows = read_rows(answer, what=f"list {kind.name}", capped=kind is TASKS)
            del answer
            sums[kind.name] = fold(kind, rows.rows)
            if not rows.cut:
                cut[kind.name] = None
                continue
            named = sorted({_job(row, kind.job_key) for row in rows.rows} - {""})
            del rows
            partial, reads_left = self._read_jobs(kind, named, sums[kind.name], reads_left)
            cut[kind.name] = partial
        pids: dict[Process, str] = dict(drivers or {})
        for kind_sums in sums.values():
            pids.update(kind_sums.pids)
        usage = self._usage(pids) if self.physical else None
        available = self._available()
        return assemble(
            taken_at,
            sums,
            cut,
            usage,
            available=available,
            requests=self._gets.requests - requests,
            bytes_read=self._gets.bytes_read - bytes_read,
        )

    def holdings_of(self, job_id: str) -> Holdings:
        """What one job holds now: its own rows of the three lists, each read filtered by its
        id (three small reads, no physical use). CensusUnsupported without a state API."""
        held: dict[str, Capacity] = {}
        complete = True
        for kind in KINDS:
            what = f"list {kind.name} of {job_id}"
            answer = self._get(self._endpoint(kind) + _equals(kind.job_key, job_id), what)
            if isinstance(answer, HTTPStatus):
                if answer.status == 404:
                    raise CensusUnsupported(
                        f"the Ray dashboard at {self.address} has no state API ({kind.path})"
                    )
                raise _error(answer, what)
            rows = read_rows(answer, what=what, capped=kind is TASKS)
            own = fold(kind, (row for row in rows.rows if _job(row, kind.job_key) == job_id))
            held[kind.name] = own.by_job.get(job_id, Capacity())
            complete = complete and not rows.cut
        return Holdings(
            job_id,
            groups=held[GROUPS.name],
            actors=held[ACTORS.name],
            tasks=held[TASKS.name],
            complete=complete,
        )

    def _read_jobs(
        self, kind: Kind, jobs: list[str], sums: Sums, reads_left: int
    ) -> tuple[set[str], int]:
        """Each job's own rows of a cut list, read again one job at a time while reads are
        left; the jobs whose figures stay a lower bound, and the reads left."""
        partial: set[str] = set()
        for job in jobs:
            if reads_left <= 0:
                partial.add(job)
                continue
            reads_left -= 1
            answer = self._get(
                self._endpoint(kind) + _equals(kind.job_key, job), f"list {kind.name} of {job}"
            )
            if isinstance(answer, HTTPStatus):
                partial.add(job)
                continue
            rows = read_rows(answer, what=f"list {kind.name} of {job}", capped=kind is TASKS)
            own = fold(kind, (row for row in rows.rows if _job(row, kind.job_key) == job))
            sums.by_job[job] = own.by_job.get(job, Capacity())
            sums.entrypoints.update(own.entrypoints)
            sums.pids.update(own.pids)
            if rows.cut:
                partial.add(job)
        return partial, reads_left

    def _usage(self, pids: Mapping[Process, str]) -> dict[str, Usage] | None:
        """Each job's physical use over the alive nodes; None when the dashboard has no
        worker data for them."""
        endpoint = f"/api/v0/nodes?detail=1&limit={STATE_LIMIT}{self._timeout_param}" + _equals(
            "state", "ALIVE"
        )
        nodes = self._get(endpoint, "list nodes")
        if isinstance(nodes, HTTPStatus):
            return None
        try:
            ids = [str(n["node_id"]) for n in read_rows(nodes, what="list nodes").rows]
        except KeyError:
            return None
        total: dict[str, Usage] = {}
        seen = False
        for start in range(0, len(ids), NODES_AT_ONCE):
            batch = ids[start : start + NODES_AT_ONCE]
            answers = self._get_all([f"/nodes/{node}" for node in batch], "node data")
            for node, answer in zip(batch, answers, strict=True):
                found = None if isinstance(answer, HTTPStatus) else usage_by_job(answer, node, pids)
                if found is None:
                    continue
                seen = True
                for job, use in found.items():
                    total[job] = total.get(job, Usage()) + use
        return total if seen else None

    def _available(self) -> Available | None:
        """What Ray's monitor last reported available; None when the dashboard does not say."""
        answer = self._get("/api/cluster_status", "read cluster status")
        return None if isinstance(answer, HTTPStatus) else available_of(answer)

    def _endpoint(self, kind: Kind) -> str:
        return f"{kind.path}?detail=true&limit={self.limit}{self._timeout_param}{kind.filters}"

    def _get(self, endpoint: str, what: str) -> Any:
        """The decoded JSON of one GET, or the HTTPStatus of a non-200 answer."""
        return self._get_all([endpoint], what)[0]

    def _get_all(self, endpoints: list[str], what: str) -> list[Any]:
        try:
            return self._gets.get_all(endpoints)
        except Unreachable as exc:
            raise RayUnavailable(f"{what}: cannot reach the Ray dashboard: {exc}") from exc
        except ValueError as exc:
            raise RayRequestError(f"{what}: the dashboard's answer is not JSON") from exc


def _error(answer: HTTPStatus, what: str) -> RayUnavailable | RayRequestError:
    if answer.status in (502, 503, 504):
        return RayUnavailable(f"{what}: {answer}")
    return RayRequestError(f"{what}: {answer}")
