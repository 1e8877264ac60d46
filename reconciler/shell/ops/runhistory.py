"""run_history.jsonl: one efficiency record per ended run, beside resource_history.jsonl in
the state folder, written only by serve; and the ledger that follows each live run of this
queue from census to census until it ends.

Writing: one JSON line per ended run (rightsize.RunRecord, every text field cut to its cap),
appended with O_APPEND so a line is whole for any reader. Rotation, as the resource
history's: past `max_bytes` the file becomes `.1`, `.1` becomes `.2`, `.2` becomes `.3`;
`.3` is dropped, so four files at most are kept, and the reader reads them all, oldest first.

The ledger keeps one RunUse per live run of this queue that a census has seen, and drops it
when Ray lists the run's job as ended (or no longer lists it): memory bounded by the live
runs. The same census gives each team queue's totals: what its live runs declare, hold and
use.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconciler.core.task.jobs import claim_of
from reconciler.shell.ops.history import ResourceHistory, history_files
from reconciler.shell.ops.rightsize import RunIdentity, RunRecord, RunUse
from specs.cluster import META_QUEUE, META_RUN, META_TASK, Capacity, Census, RayJob, Usage
from specs.queues.config import DEFAULT_QUEUE
from specs.task.quantity import format_memory

log = logging.getLogger("rayqueue.loop")

FILE_NAME = "run_history.jsonl"
# A history line longer than this is not one the writer wrote: the reader skips it.
MAX_LINE_BYTES = 16 * 1024


class RunHistory:
    """Appends run records, rotated by size, and reads them back."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        # The resource history's writer: its O_APPEND write and rotation, with no heartbeat.
        self.writer = ResourceHistory(path, max_bytes)

    def append(self, record: RunRecord) -> None:
        self.writer.append(record.to_json())

    def records(self) -> list[RunRecord]:
        """Every record of the files, oldest first; a torn or foreign line is skipped."""
        return list(read_records(self.path))


def read_records(path: Path) -> Iterator[RunRecord]:
    """The records of `path` and its rotated files, oldest first."""
    for file in history_files(path):
        try:
            data = file.read_bytes()
        except OSError:
            continue
        end = data.rfind(b"\n") + 1  # only whole lines: one being written is read later
        for raw in data[:end].splitlines():
            if len(raw) > MAX_LINE_BYTES:
                continue
            try:
                record = RunRecord.from_json(json.loads(raw))
            except ValueError:
                continue
            if record is not None:
                yield record


@dataclass(frozen=True)
class QueueUse:
    """What one team queue's live runs declare, hold (Ray's logical resources) and use
    (cores busy, resident memory, GPU memory), as one census saw them. `complete`: no figure
    is a lower bound."""

    runs: int = 0
    declared: Capacity = field(default_factory=Capacity)
    held: Capacity = field(default_factory=Capacity)
    cores: float = 0.0
    memory: float = 0.0
    gpu_memory: float = 0.0
    physical: bool = False
    complete: bool = True

    def plus(
        self, declared: Capacity, held: Capacity, usage: Usage | None, complete: bool
    ) -> QueueUse:
        return QueueUse(
            self.runs + 1,
            self.declared + declared,
            self.held + held,
            self.cores + (usage.cpu_percent / 100.0 if usage is not None else 0.0),
            self.memory + (usage.memory if usage is not None else 0.0),
            self.gpu_memory + (usage.gpu_memory if usage is not None else 0.0),
            self.physical or usage is not None,
            self.complete and complete,
        )

    def merged(self, other: QueueUse) -> QueueUse:
        return QueueUse(
            self.runs + other.runs,
            self.declared + other.declared,
            self.held + other.held,
            self.cores + other.cores,
            self.memory + other.memory,
            self.gpu_memory + other.gpu_memory,
            self.physical or other.physical,
            self.complete and other.complete,
        )

    def to_json(self) -> dict[str, Any]:
        """The `observed` block of a queue in _queues.status.yaml and GET /queues."""
        out: dict[str, Any] = {
            "runs": self.runs,
            "declared": _amounts(self.declared),
            "held": _amounts(self.held),
            "complete": self.complete,
        }
        if self.physical:
            out["used"] = {
                "cpu": round(self.cores, 3),
                "memory": _mebibytes(self.memory),
                "gpuMemory": _mebibytes(self.gpu_memory),
            }
        return out


@dataclass(frozen=True)
class QueueCensus:
    """Each team queue's QueueUse at one census (`taken_at`, Unix seconds), its own runs
    only (a parent's totals are rolled up where the queue tree is known)."""

    taken_at: float
    queues: Mapping[str, QueueUse] = field(default_factory=dict)


@dataclass
class _Live:
    identity: RunIdentity
    use: RunUse


class RunLedger:
    """Follows this queue's live runs from census to census (`observe`), and appends each
    ended run's record to `history`."""

    def __init__(self, history: RunHistory | None, queue_id: str, hold_seconds: float) -> None:
        self.history = history
        self.queue_id = queue_id
        self.hold_seconds = hold_seconds
        self.live: dict[str, _Live] = {}  # by submission id
        self.seen: Census | None = None  # the last census observed
        self.queues: QueueCensus | None = None

    def observe(
        self,
        census: Census,
        jobs: Mapping[str, RayJob],
        queue_of: Callable[[str, str], str | None],
    ) -> list[RunRecord]:
        """One census, with Ray's jobs as the loop last listed them (by submission id):
        each live run of this queue observed, each ended one recorded and dropped.
        `queue_of(task, submission_id)`: the team queue the loop's status gives the task's
        run, if it names that run. Returns the records written."""
        if census is self.seen:
            return []
        self.seen = census
        totals: dict[str, QueueUse] = {}
        ended: list[RunRecord] = []
        for sid, job in jobs.items():
            if job.metadata.get(META_QUEUE) != self.queue_id:
                continue
            if job.terminal:
                live = self.live.pop(sid, None)
                if live is not None:
                    ended.append(self._end(live, job))
                continue
            if job.job_id is None:
                continue  # its driver has not started: nothing to see yet
            live = self.live.get(sid)
            if live is None:
                live = self.live[sid] = _Live(
                    self._identity(sid, job, queue_of), RunUse(self.hold_seconds)
                )
            elif live.identity.queue is None:
                live.identity = replace(live.identity, queue=queue_of(live.identity.task, sid))
            holdings = census.of(job.job_id)
            held = holdings.logical + census.entrypoints.get(sid, Capacity())
            usage = holdings.usage
            if usage is None and census.physical:
                usage = Usage()  # the census read every process and found none of this job's
            live.use.observe(census.taken_at, held, usage, complete=holdings.complete)
            queue = live.identity.queue or DEFAULT_QUEUE
            totals[queue] = totals.get(queue, QueueUse()).plus(
                live.identity.declared, held, usage, holdings.complete
            )
        for sid in [s for s in self.live if s not in jobs]:
            # Ray no longer lists it (deleted from its history): ended when last seen.
            live = self.live.pop(sid)
            ended.append(self._record(live, live.use.last_at, "ENDED"))
        self.queues = QueueCensus(census.taken_at, totals)
        return ended

    def _identity(
        self, sid: str, job: RayJob, queue_of: Callable[[str, str], str | None]
    ) -> RunIdentity:
        task = job.metadata.get(META_TASK, "")
        try:
            run = int(job.metadata.get(META_RUN, "1") or 1)
        except ValueError:
            run = 1
        return RunIdentity(
            task=task,
            run=run,
            submission_id=sid,
            queue=queue_of(task, sid),
            declared=claim_of(job),
            started_at=job.start_time,
        )

    def _end(self, live: _Live, job: RayJob) -> RunRecord:
        if job.start_time is not None:
            live.identity = replace(live.identity, started_at=job.start_time)
        ended_at = job.end_time if job.end_time is not None else live.use.last_at
        return self._record(live, ended_at, job.status)

    def _record(self, live: _Live, ended_at: float | None, outcome: str) -> RunRecord:
        record = live.use.record(replace(live.identity, outcome=outcome), ended_at)
        if self.history is not None:
            try:
                self.history.append(record)
            except OSError as exc:
                log.warning("cannot append run history: %s", exc)
        return record


def rolled_up(
    queues: Mapping[str, QueueUse], parents: Mapping[str, str | None]
) -> dict[str, QueueUse]:
    """Each queue's totals with its sub-queues' (`parents`: each queue's parent, or None)."""
    out: dict[str, QueueUse] = {}
    for name, use in queues.items():
        seen: set[str] = set()
        here: str | None = name
        while here is not None and here not in seen:
            seen.add(here)
            out[here] = out.get(here, QueueUse()).merged(use)
            here = parents.get(here)
    return out


def with_observed(document: Mapping[str, Any], queues: QueueCensus | None) -> dict[str, Any]:
    """The queue status document with each queue's `observed` block (a parent's includes its
    sub-queues') and the census's time (`observedAt`), when a census has been seen; the
    other fields as they are."""
    if queues is None:
        return dict(document)
    body = document.get("status")
    if not isinstance(body, dict) or not isinstance(body.get("queues"), list):
        return dict(document)
    entries = [e for e in body["queues"] if isinstance(e, dict)]
    parents = {
        str(e.get("name")): (str(e["parent"]) if isinstance(e.get("parent"), str) else None)
        for e in entries
    }
    totals = rolled_up(queues.queues, parents)
    observed_queues = [
        {**e, "observed": totals.get(str(e.get("name")), QueueUse()).to_json()}
        if isinstance(e, dict)
        else e
        for e in body["queues"]
    ]
    at = datetime.fromtimestamp(queues.taken_at, UTC).isoformat(timespec="seconds")
    return {**document, "status": {**body, "queues": observed_queues, "observedAt": at}}


def _amounts(value: Capacity) -> dict[str, Any]:
    """As the queue status writes its other amounts: memory an exact binary quantity."""
    return {
        "cpu": round(value.cpu, 3),
        "gpu": round(value.gpu, 3),
        "memory": _mebibytes(value.memory),
    }


def _mebibytes(num_bytes: float) -> str:
    """Bytes rounded up to whole Mi (a process's resident memory is any number of bytes)."""
    if not math.isfinite(num_bytes) or num_bytes <= 0:
        return "0"
    return format_memory(math.ceil(num_bytes / 2**20) * 2**20)
