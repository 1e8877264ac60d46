"""Explicit submission id claims kept between passes, for the fast pass (core/task/idclaims.py
decides them; `planner.with_id_claims` applies them in the full pass).

Whether a claimant of an id may use it depends on more than its own inputs: on the other
claimants of that id (their specs), on every status that records a run of it (a task's, also
one whose spec no longer names it, or a sidecar's without a spec) and on this queue's jobs that
hold a run of it. None of those shows in the claimant's own version. So the memo keeps, by id,
the tasks that claim it, the statuses that record a run of it and our jobs that hold one, and
the claims refused; a pass that sees any of those change for an id (a claimant edited, added
or deleted, a status or a job of it come or gone) judges that id's claims again
(`idclaims.refusals`, as `idclaims.conflicts` does) and redoes every claimant of it. An id
whose claimants, runs and jobs did not change keeps its verdict.

Only a status or job id that can be a run of an explicit id is indexed: rayqueue's own ids
(`rq-<slug>-<uid>-<run>`) are none (an explicit id never starts with `rq-`), so a queue without
explicit ids keeps these maps empty.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from reconciler.core.planner import TaskInput
from reconciler.core.task import idclaims
from specs.cluster import META_TASK, RayJob
from specs.task import submission_ids
from specs.task.status import TaskStatus


@dataclass(frozen=True)
class KeptClaims:
    """The explicit id claims as the last pass saw them. Treat as immutable: a pass copies
    what it changes."""

    claimed: Mapping[str, str] = field(default_factory=dict)  # task -> the id its spec names
    claimants: Mapping[str, frozenset[str]] = field(default_factory=dict)  # id -> those tasks
    # task -> the id its status records a run under, if that can be a run of an explicit id
    recorded: Mapping[str, str] = field(default_factory=dict)
    ran: Mapping[str, frozenset[str]] = field(default_factory=dict)  # id -> tasks with a run of it
    # Our jobs whose id can be a run of an explicit id -> the task each names (META_TASK, or
    # ""); None: not read (no task claimed an id).
    jobs: Mapping[str, str] | None = None
    held: Mapping[str, frozenset[str]] = field(default_factory=dict)  # id -> job ids of it
    refused: Mapping[str, str] = field(default_factory=dict)  # task -> why its claim is refused


NO_CLAIMS = KeptClaims()


def claim_of(spec: TaskInput | None) -> str | None:
    """The explicit submission id a spec (as read) claims."""
    task = spec.task if spec is not None else None
    return (task.spec.submission_id or None) if task is not None else None


def runs_of(sid: str | None) -> tuple[str, ...]:
    """The explicit ids a run recorded under `sid` may have been started with. rayqueue's own
    ids are runs of none (their bases start with `rq-`, which an explicit id never does), told
    apart without a regex: only `rq-<digits>` has a base without that prefix (`rq`)."""
    if not sid:
        return ()
    prefix = submission_ids.RESERVED_PREFIX
    if sid.startswith(prefix) and not sid[len(prefix) :].isdigit():
        return ()
    return submission_ids.bases(sid)


def recorded_of(status: TaskStatus | None) -> str | None:
    """The id a status records a run under, if it can be a run of an explicit id."""
    sid = idclaims.run_id(status) if status is not None else None
    return sid if runs_of(sid) else None


def our_jobs(ours: Mapping[str, RayJob]) -> dict[str, str]:
    """Our jobs whose id can be a run of an explicit id, and the task each names."""
    return {sid: job.metadata.get(META_TASK, "") for sid, job in ours.items() if runs_of(sid)}


def claims_after_full(
    read: Mapping[str, TaskInput],
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    ours: Mapping[str, RayJob],
) -> KeptClaims:
    """The claims a full pass leaves: `read`, the specs as read; `specs`, with the claims
    refused turned Invalid (planner.with_id_claims)."""
    claimed = {name: sid for name, spec in read.items() if (sid := claim_of(spec)) is not None}
    recorded = {
        name: sid for name, status in statuses.items() if (sid := recorded_of(status)) is not None
    }
    refused = {
        name: str(why)
        for name in claimed
        if specs[name].task is None and (why := specs[name].error) is not None
    }
    jobs = our_jobs(ours) if claimed else None
    return KeptClaims(
        claimed=claimed,
        claimants=_grouped((sid, name) for name, sid in claimed.items()),
        recorded=recorded,
        ran=_grouped((base, name) for name, sid in recorded.items() for base in runs_of(sid)),
        jobs=jobs,
        held=_grouped((base, sid) for sid in jobs or () for base in runs_of(sid)),
        refused=refused,
    )


def _grouped(pairs: Iterable[tuple[str, str]]) -> dict[str, frozenset[str]]:
    found: dict[str, set[str]] = {}
    for key, value in pairs:
        found.setdefault(key, set()).add(value)
    return {key: frozenset(values) for key, values in found.items()}


class _Index:
    """One of KeptClaims' maps of sets, copied on its first change."""

    def __init__(self, kept: Mapping[str, frozenset[str]]) -> None:
        self.kept = kept
        self.changed: dict[str, frozenset[str]] | None = None

    def move(self, key: str, value: str, add: bool) -> None:
        if self.changed is None:
            self.changed = dict(self.kept)
        values = self.changed.get(key, frozenset())
        values = values | {value} if add else values - {value}
        if values:
            self.changed[key] = values
        else:
            self.changed.pop(key, None)

    def now(self) -> Mapping[str, frozenset[str]]:
        return self.kept if self.changed is None else self.changed


def claims_after(
    kept: KeptClaims,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    ours: Mapping[str, RayJob],
    names: Collection[str],
    folders: idclaims.Folders = idclaims.ONE_FOLDER,
) -> tuple[KeptClaims, set[str]]:
    """The claims of this pass, and the claimants to redo: every claimant of an id whose
    claims, runs or jobs changed. `names`: every task whose spec or status may have changed
    since the last pass (a version changed, a spec or sidecar came or went, every sidecar
    without a spec). `folders`: as the last pass's (its visibility is in the options, which
    keep the memo; a task's record of when its claim was seen changes only with its claim)."""
    touched: set[str] = set()  # the ids to judge again
    claimed: dict[str, str] | None = None
    claimants = _Index(kept.claimants)
    recorded: dict[str, str] | None = None
    ran = _Index(kept.ran)
    for name in names:
        was, now = kept.claimed.get(name), claim_of(specs.get(name))
        if was != now:
            if claimed is None:
                claimed = dict(kept.claimed)
            if was is not None:
                del claimed[name]
                claimants.move(was, name, add=False)
                touched.add(was)
            if now is not None:
                claimed[name] = now
                claimants.move(now, name, add=True)
                touched.add(now)
        was, now = kept.recorded.get(name), recorded_of(statuses.get(name))
        if was != now:
            if recorded is None:
                recorded = dict(kept.recorded)
            if now is None:
                del recorded[name]
            else:
                recorded[name] = now
            for base in runs_of(was):
                ran.move(base, name, add=False)
                touched.add(base)
            for base in runs_of(now):
                ran.move(base, name, add=True)
                touched.add(base)
    wanted = claimants.now()
    jobs, held = _jobs_after(kept, wanted, ours, touched)
    if not touched:  # (a claim, a run or a job that changed touched its id)
        return kept, set()
    refused, redo = _judged(kept, wanted, ran.now(), jobs, held, touched, folders)
    after = KeptClaims(
        claimed=kept.claimed if claimed is None else claimed,
        claimants=wanted,
        recorded=kept.recorded if recorded is None else recorded,
        ran=ran.now(),
        jobs=jobs,
        held=held,
        refused=refused,
    )
    return after, redo


def _jobs_after(
    kept: KeptClaims,
    wanted: Mapping[str, frozenset[str]],
    ours: Mapping[str, RayJob],
    touched: set[str],
) -> tuple[Mapping[str, str] | None, Mapping[str, frozenset[str]]]:
    """Our jobs that can be runs of explicit ids, read while any task claims an id (else
    None), and by id the jobs of it; the ids whose jobs came, went or changed task added to
    `touched`."""
    if not wanted:
        return None, {}
    jobs = our_jobs(ours)
    if kept.jobs is None:  # every id claimed now is claimed anew: touched already
        return jobs, _grouped((base, sid) for sid in jobs for base in runs_of(sid))
    if jobs == kept.jobs:
        return kept.jobs, kept.held
    held = _Index(kept.held)
    for sid, _ in jobs.items() ^ kept.jobs.items():
        present = sid in jobs
        for base in runs_of(sid):
            held.move(base, sid, present)
            touched.add(base)
    return jobs, held.now()


def _judged(
    kept: KeptClaims,
    wanted: Mapping[str, frozenset[str]],
    ran: Mapping[str, frozenset[str]],
    jobs: Mapping[str, str] | None,
    held: Mapping[str, frozenset[str]],
    touched: set[str],
    folders: idclaims.Folders,
) -> tuple[dict[str, str], set[str]]:
    """The claims refused once the `touched` ids are judged again, and their claimants."""
    refused = dict(kept.refused)
    for sid in touched:  # every verdict on them goes, before any is given anew
        for name in (*kept.claimants.get(sid, ()), *wanted.get(sid, ())):
            refused.pop(name, None)
    redo: set[str] = set()
    for sid in touched & wanted.keys():
        names = wanted[sid]
        redo |= names
        assert jobs is not None  # read while any task claims an id
        holders = {jobs[job] for job in held.get(sid, ())}
        runs = ran.get(sid, frozenset())
        refused.update(idclaims.refusals(sid, names, runs, holders, folders))
    return refused, redo
