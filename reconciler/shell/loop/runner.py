"""The thin shell around the planner: read everything, plan, write statuses, then act on Ray."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import UTC, datetime

from reconciler.core import incremental
from reconciler.core.planner import Observation, Plan, TaskInput
from reconciler.core.task import lifecycle
from reconciler.shell.loop import writes
from reconciler.shell.loop.acting import RAY_STOP_WAIT, STOP_MARGIN, RayActions
from reconciler.shell.loop.changes import Changes, Version
from reconciler.shell.loop.faults import Faults
from reconciler.shell.loop.gitrev import GitRevisions, SourceRevision
from reconciler.shell.loop.holdings import CensusJoin
from reconciler.shell.loop.inputs import SpecInputs
from reconciler.shell.loop.inputs import plan_options as plan_options  # re-exported
from reconciler.shell.loop.inputs import queue_file as queue_file  # re-exported
from reconciler.shell.loop.inputs import scan_specs as scan_specs  # re-exported
from reconciler.shell.loop.invalidspecs import InvalidSpecs
from reconciler.shell.loop.lastseen import LoopState
from reconciler.shell.loop.queuefile import UsageBook, read_status
from reconciler.shell.loop.raystate import RayObserver
from reconciler.shell.loop.raystate import observe_ray as observe_ray  # re-exported: cli/plan.py
from reconciler.shell.loop.repeats import Repeating
from reconciler.shell.loop.report import PassReport
from reconciler.shell.loop.scaling import AutoscalerMetrics, ScaleRequests
from reconciler.shell.loop.seenclaims import FILE_NAME as SEEN_CLAIMS_FILE
from reconciler.shell.loop.seenclaims import SeenClaims
from reconciler.shell.loop.timing import next_wait
from reconciler.shell.ops import memory
from reconciler.shell.ops.census import CensusPoller
from reconciler.shell.ops.history import ResourceHistory
from reconciler.shell.ops.metrics import QueueMetrics
from reconciler.shell.ops.recorder import PassObserver
from reconciler.shell.ops.runhistory import FILE_NAME as RUN_HISTORY_FILE
from reconciler.shell.ops.runhistory import RunHistory, RunLedger
from reconciler.shell.watch.events import FileEvents
from specs.cluster import Autoscaler, Census, RayAdapter
from specs.folder.store import FolderSettling, FolderUnavailable, TaskStore
from specs.settings.process import Settings
from specs.task.models import Reason, SourceRef
from specs.task.records import Task
from specs.task.status import TaskStatus
from specs.tenancy.runtimepaths import OFF, RuntimePaths

log = logging.getLogger("rayqueue.loop")

# A stop is sent once per run. Ray stops a job within its stop wait (3 s by default, the
# preemption grace when that is set); a job still listed as live well past it may have lost
# the request (a stop of a job still PENDING can be, ray #58353), so it is sent again then.


class Reconciler:
    def __init__(
        self,
        settings: Settings,
        store: TaskStore,
        ray: RayAdapter,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
        faults: Faults | None = None,
        metrics: QueueMetrics | None = None,
        paths: RuntimePaths = OFF,
        autoscaler: Autoscaler | None = None,
        census: CensusPoller | None = None,
    ) -> None:
        """`clock`: wall time, what the planner plans at; `monotonic`: the loop's own pace
        (rescans, waits); `cpu_clock`: this thread's CPU time (what a full walk costs).
        `census`: what every Ray job holds, taken on a thread of its own (started beside the
        loop's, reconciler/app/assembly.py); the loop only reads its latest."""
        self.settings = settings
        # runtimeEnv local paths, checked again right before Ray reads them (a root or a
        # folder in it may have become a symlink since the spec was read).
        self.paths = paths
        self.faults = faults or Faults()  # crash points for the reliability suite; off by default
        self.store = store
        self.ray = ray
        self.clock = clock
        self.monotonic = monotonic
        self.cpu_clock = cpu_clock
        self.options = plan_options(settings)
        self.state = LoopState()
        self.history = ResourceHistory(
            settings.resolved_state_dir / "resource_history.jsonl",
            settings.history_max_bytes,
            heartbeat_seconds=settings.history_heartbeat_seconds,
        )
        self.metrics = metrics
        self.observer = PassObserver(self.history, metrics)
        self.revisions = GitRevisions(settings.tasks_dir) if settings.git_revision else None
        # When each task's explicit id claim was first seen: what decides between folders.
        self.seen_claims = SeenClaims(settings.resolved_state_dir / SEEN_CLAIMS_FILE)
        # name -> its input with the commit its file came from (git_revision), kept between
        # passes and updated by the inputs that changed, or all when git's answer changed.
        self._sourced: dict[str, TaskInput] = {}
        self._sources_stale = False  # a pass failed after reading: rebuild _sourced at the next
        self._source_version = 0  # a new one whenever git's answer changes
        self.wake = threading.Event()
        # Filled by the watcher (reconciler/app/assembly.py); with none attached, every pass walks.
        self.events = FileEvents(self.wake)
        self._walked_at = -float("inf")  # monotonic time of the last full walk of the folder
        self._walking = True  # this pass walks the folder (and rereads every sidecar)
        self._walk_cpu = 0.0  # CPU seconds the last full walk took (this thread's)
        # Whether folder_error is the folder lost (said as an ERROR) rather than files settling.
        self._folder_lost = False
        self._backlog = False  # deferred sidecars left after a flush that used its budget
        self._deadline: float | None = None  # the last plan's (Plan.deadline)
        self._changed_at = -float("inf")  # monotonic time of the last pass that was not still
        self._lock = threading.Lock()  # one pass at a time, whoever calls it
        # The folder as planner inputs, kept between passes (inputs.SpecInputs), and the
        # names whose input changed in this pass's read.
        self._specs = SpecInputs()
        self._spec_changes: set[str] = set()
        self._invalid = InvalidSpecs()
        # Each task's Version and what changed since the last pass (changes.py).
        self.changes = Changes()
        # Last pass's per-task results and the plan that stands (incremental.Stand), handed
        # to the next pass; a new loop starts afresh.
        self._memo = incremental.EMPTY
        # The queue files settle as the specs do: a file being written is read once complete.
        self.queue_file = queue_file(settings, store.settle_seconds, clock)
        # The queues' decayed usage, read back from the status file the last run wrote.
        self.usage = UsageBook(read_status(self.queue_file.status_path))
        self._fingerprint = 0  # a new one whenever the spec files read change (asking git)
        self._revision: SourceRevision | None = None
        self.skipped = 0  # passes skipped as still (a counter for benchmarks and tests)
        # Ray's autoscaler: its report is read at the capacity read's pace, and the
        # plan's scale_request is sent to it when it changes. None: nothing is asked of it.
        self.autoscaler = autoscaler
        self.census = census
        # What the planner is told Ray's jobs hold: the latest census joined to the listing.
        self.census_join: CensusJoin | None = None
        if census is not None:
            census.follow(lambda: self.state.jobs, self.options.queue_id)
            self.census_join = CensusJoin(census.interval_seconds)
        self.scale_requests = (
            ScaleRequests(
                autoscaler, AutoscalerMetrics(metrics.registry) if metrics is not None else None
            )
            if autoscaler is not None
            else None
        )
        # Repeating errors: logged when they start, counted while they last, and when they end.
        self._ray_down = Repeating(
            log, "Ray unavailable; nothing will be stopped; retrying", clock, level=logging.WARNING
        )
        self._status_writes = Repeating(log, "cannot write status", clock)
        self._writes_ok = self._writes_failed = 0  # this pass's status writes
        # The Ray side of a pass (observe: backoff, capacity and autoscaler caches) and the
        # acting side (submit, stop once per run, expire, log tails); `self.ray` is handed to
        # each call, so replacing it takes effect at once.
        self.ray_observer = RayObserver(settings, self.queue_file, autoscaler, self._ray_down)
        self.actions = RayActions(store, self.faults, paths, self._ray_down, self._status_writes)
        # Tasks whose first status could not be written: the Queued status they would have had,
        # so that their uid (minted from the pass that first saw them) stays the same until
        # one is on disk. Nothing was submitted for them (nothing is without its record).
        self._unrecorded: dict[str, TaskStatus] = {}
        # What a pass reports: the state, the metrics, the history, _queues.status.yaml.
        self.report = PassReport(
            self.state,
            self.observer,
            metrics,
            self.queue_file,
            self.usage,
            self._specs.inputs.get,
            clock,
            self._run_ledger(),
            self.latest_census,
        )

    def _run_ledger(self) -> RunLedger | None:
        """What each live run holds from census to census, and the run history it ends in;
        None without a census. A census's figures hold until the next, or a few missed
        censuses at most."""
        if self.census is None:
            return None
        history = RunHistory(
            self.settings.resolved_state_dir / RUN_HISTORY_FILE, self.settings.history_max_bytes
        )
        return RunLedger(history, self.options.queue_id, 2.5 * self.census.interval_seconds)

    def latest_census(self) -> Census | None:
        """What every Ray job held at the last census (a value no one changes); None without
        a census, before the first, or while Ray cannot say."""
        return self.census.latest if self.census is not None else None

    # -- one pass ------------------------------------------------------------------------------
    def observe(self) -> Observation:
        """One job listing and one capacity read, or the reason we could not have them; with
        a census, what Ray says each job holds and what it reported available."""
        now = self.clock()
        observed = self.ray_observer.observe(self.ray, now, self.state)
        if self.census_join is None or observed.jobs is None:
            return observed
        found = self.census_join.read(self.latest_census(), observed.jobs, now)
        return replace(observed, held=found.held, ray_available=found.ray_available)

    @property
    def resend_stop_seconds(self) -> float:
        """How long after a stop Ray may still list a job this process did not submit before
        the stop is sent again: the longest stop wait a job can have (the flag's grace or any
        queue's), plus a margin. A job it submitted waits its own (RayActions.stop_waits)."""
        config = self.queue_file.load().config
        graces = [self.settings.preemption_grace_seconds, RAY_STOP_WAIT]
        if config is not None:
            graces += [
                grace
                for name in config.queue_names()
                if (grace := config.preemption_of(name).grace_period_seconds) is not None
            ]
        return max(graces) + STOP_MARGIN

    def _spec_of(self, task: str) -> Task | None:
        given = self._specs.inputs.get(task)
        return given.task if given is not None else None

    def _changed_paths(self) -> set[str] | None:
        """What file events named since the last pass, or None when this pass must walk the
        whole folder: no watcher, events possibly lost, or the periodic full rescan is due
        (it catches whatever events missed, as controller-runtime's resync does)."""
        changed = self.events.take()
        now = self.monotonic()
        self._walking = changed is None or now - self._walked_at >= self.rescan_interval()
        if self._walking:
            self._walked_at = now
            return None
        return changed

    @property
    def walk_cpu_seconds(self) -> float:
        """CPU seconds (this thread's) the last full walk of the folder took."""
        return self._walk_cpu

    def force_full_pass(self) -> None:
        """Make the next pass run the planner even if nothing it reads has changed (the
        still-pass shortcut is dropped once); its inputs are read as usual."""
        with self._lock:
            self._memo = incremental.without_standing(self._memo)

    def rescan_interval(self) -> float:
        """rescan_seconds, stretched so that walks stay within rescan_cpu_share of a core."""
        interval = self.settings.rescan_seconds
        share = self.settings.rescan_cpu_share
        if interval > 0 and share > 0:
            interval = max(interval, self._walk_cpu / share)
        return interval

    def read_specs(self, changed: set[str] | None = None) -> dict[str, TaskInput] | None:
        complete = self.events.take_complete()
        if complete:
            self.store.mark_whole(complete)
        try:
            self._spec_changes = self._specs.read(self.store, changed)
            self._invalid.note(self._specs.inputs, self._spec_changes)
        except FolderSettling as exc:
            # Files written just before the first scan are only being finished: nothing is
            # wrong with the folder, so this is said at INFO, and the pass waits for them.
            if self.state.folder_error is None:
                log.info("%s", exc)
            self.state.folder_error = str(exc)
            self._folder_lost = False
            return None
        except FolderUnavailable as exc:
            if self.state.folder_error is None or not self._folder_lost:
                log.error("tasks folder unavailable (%s); nothing is stopped until it is back", exc)
            self.state.folder_error = str(exc)
            self._folder_lost = True
            return None
        if self.state.folder_error is not None:
            if self._folder_lost:
                log.info("tasks folder is back")
            self.state.folder_error = None
            self._folder_lost = False
        if self.revisions is not None:
            return self._with_sources()
        return self._specs.handed(self._specs.inputs, bool(self._spec_changes))

    def _with_sources(self) -> dict[str, TaskInput]:
        """Each input with the commit its file came from. git is asked only when the files
        read or git's HEAD, ref or index changed; an unchanged input with an unchanged answer
        is kept as it was (only the changed inputs are looked at)."""
        assert self.revisions is not None
        if self._spec_changes:
            self._fingerprint += 1  # the files read changed: git's answer may have
        revision = self.revisions.current(self._fingerprint)
        names: AbstractSet[str] = self._spec_changes
        if revision != self._revision:
            self._source_version += 1
        if revision != self._revision or self._sources_stale:
            names = self._specs.inputs.keys() | self._sourced.keys()
        self._revision, self._sources_stale = revision, False
        for name in names:
            base = self._specs.inputs.get(name)
            if base is None:
                self._sourced.pop(name, None)
            elif revision is None:
                self._sourced[name] = base
            else:
                path = base.path
                assert path is not None  # the store's inputs name their file
                relative = path.relative_to(self.settings.tasks_dir).as_posix()
                rev, dirty = revision.of(relative)
                self._sourced[name] = replace(base, source=SourceRef(revision=rev, dirty=dirty))
        return self._specs.handed(self._sourced, bool(names))

    def run_pass(self) -> Plan | None:
        with self._lock:
            try:
                if self.metrics is None:
                    return self._run_pass()
                with self.metrics.time_pass():
                    return self._run_pass()
            except BaseException:
                # What this pass read may be in the store's records and not yet in what the
                # loop keeps (sources, versions): the next pass rebuilds those from all it reads.
                self._sources_stale = True
                self.seen_claims.stale = True
                self.changes.lost()
                self._memo = incremental.without_standing(self._memo)
                self.report.stale()  # and counts what its plan changed from all statuses
                if self.metrics is not None:
                    self.metrics.recount()
                raise

    def _run_pass(self) -> Plan | None:
        changed = self._changed_paths()
        observed: Observation | None = None
        if self._memo.still and changed is not None and not changed and self.store.still():
            # Nothing named by events, nothing settling: no task can have changed, so if Ray,
            # the clock and the queue file say nothing new either, the last still plan stands
            # (incremental.stands) and the folder and its sidecars are not read at all: a read
            # takes the store's lock, which the API's requests share, and hands the planner
            # every task's version, a copy the size of the folder.
            observed = self.observe()
            if self._stands_unread(observed):
                assert self._memo.standing is not None
                return self._skip(self._memo.standing.plan, observed)
        walk_started = self.cpu_clock()
        specs = self.read_specs(changed)
        if specs is None:
            self._memo = incremental.without_standing(self._memo)
            self._deadline = None
            self.state.last_pass_at = self.clock()
            return None  # a vanished folder is never read as "delete everything"
        # Sidecars are ours: between full walks, the store's record of what it wrote stands.
        statuses, status_generations, status_changes = self.store.read_status_changes(
            cached=not self._walking
        )
        unrecorded = bool(self._unrecorded)
        if unrecorded:
            statuses, status_generations = self._with_unrecorded(
                specs, statuses, status_generations
            )
        source = self._source_version if self.revisions is not None else 0
        versions = self.changes.read(
            specs,
            status_generations,
            self._spec_changes,
            status_changes,
            source,
            unrecorded,
        )
        if self._walking:
            self._walk_cpu = self.cpu_clock() - walk_started
        if observed is None:
            observed = self.observe()
        now = datetime.fromtimestamp(self.clock(), UTC)
        seen_claims = self.seen_claims.update(specs, self._spec_changes, now.timestamp())
        queues = self.queue_file.load()
        # The usage is kept only by a pass that plans: one that stands advances nothing.
        usage = self.usage.at_time(now.timestamp(), queues.config)
        plan, self._memo = incremental.plan_incremental(
            self._memo,
            specs,
            statuses,
            observed,
            now,
            self.options,
            queues=queues.config,
            usage=usage,
            versions=versions,
            queue_error=queues.error_without_config,
            changed=self.changes.changed,
            stand=incremental.Stand((queues.generation, self._revision), self.store.still()),
            seen_claims=seen_claims,
        )
        if self._memo.stood:
            # Nothing changed but what the last plan wrote, read back: that plan stands
            # (reconciler/core/incremental/standing.py), and the planner did not run.
            return self._skip(plan, observed)
        self.usage.advance(now.timestamp(), queues.config, usage)
        if plan.summary is not None and plan.summary.queues is not None:
            self.usage.observe({n: s.usage for n, s in plan.summary.queues.states.items()})
        plan = self.actions.with_log_tails(self.ray, plan, self.settings.log_tail_lines)
        for event in plan.events:
            # What was done, not what was planned: a submission is logged once Ray accepted it
            # (RayActions.submit); a planned one whose record could not be written never happens.
            if event.reason is Reason.STATUS_IGNORED and event.task is not None:
                log.log(event.level, "%s: %s", self.store.status_file(event.task), event.message)
            elif event.reason is not Reason.SUBMITTED:
                log.log(event.level, "%s", event.message)
        self._writes_ok = self._writes_failed = 0
        self._count_pass("walk" if self._walking else "events")
        plan, unwritten, refused = self._carry_out(plan, statuses, versions, now)
        if self.scale_requests is not None:
            self.scale_requests.act(plan.scale_request, self.clock(), len(plan.submits))
        if self._writes_ok and not self._writes_failed:
            self._status_writes.cleared()
        self.report.record(plan, statuses, observed, walking=self._walking)
        self.report.queue_status(plan, queues, walking=self._walking)
        self.report.census(plan.statuses)
        self._deadline = plan.deadline
        if not plan.still:
            self._changed_at = self.monotonic()
        if (unwritten or refused) and not plan.still:
            # What the plan gave is not all on disk: its read-back is planned.
            self._memo = incremental.without_standing(self._memo)
        return plan

    def _stands_unread(self, observed: Observation) -> bool:
        """Whether the last still plan stands, asked without reading the folder."""
        now = datetime.fromtimestamp(self.clock(), UTC)
        revision = self._revision
        if self.revisions is not None:
            revision = self.revisions.current(self._fingerprint)
        inputs = (self.queue_file.load().generation, revision)
        return incremental.stands(self._memo, observed, now, inputs)

    def _carry_out(
        self,
        plan: Plan,
        statuses: Mapping[str, TaskStatus],
        versions: Mapping[str, Version],
        now: datetime,
    ) -> tuple[Plan, set[str], dict[str, TaskStatus]]:
        """Writes the plan's statuses and acts on Ray, in the order a crash anywhere allows:
        the plan as carried out (a submit Ray refused is a new status), the tasks whose
        status is not on disk, and the refused submits."""
        # A run's submission id is on disk before Ray ever hears of it: the statuses of the
        # tasks being submitted go first, then the submits, then every other status (queue
        # positions and such, which need not delay a start), and only then the stops.
        submitting = {submit.task for submit in plan.submits}
        classes = writes.split(plan, self.changes.edited(versions, self._spec_changes))
        # An array's elements share one sidecar: each batch writes it once.
        with self.store.batch() as failed:
            unwritten = self._write_statuses(plan, statuses, classes, only=submitting)
        unwritten |= failed
        refused = self.actions.submit(self.ray, plan, unwritten, now, self._spec_of)
        self.ray_observer.view.submitted(s.request.submission_id for s in plan.submits)
        if refused:
            plan = replace(plan, statuses={**plan.statuses, **refused})
        with self.store.batch() as failed:
            unwritten |= self._write_statuses(plan, statuses, classes, skip=submitting)
        unwritten |= failed
        self.actions.stop(self.ray, plan, unwritten, self.clock(), self.resend_stop_seconds)
        self.actions.expire(self.ray, plan)
        self.ray_observer.view.deleted(plan.deletes)
        with self.store.batch():
            for name in plan.delete_statuses:
                self.faults.crash_point("before_delete_status")
                try:
                    self.store.delete_status(name)
                except OSError as exc:
                    log.error("cannot remove status of deleted task %s: %s", name, exc)
        self._flush()
        return plan, unwritten, refused

    def _with_unrecorded(
        self,
        specs: Mapping[str, TaskInput],
        statuses: Mapping[str, TaskStatus],
        generations: Mapping[str, int],
    ) -> tuple[dict[str, TaskStatus], dict[str, int]]:
        """The statuses read, plus the remembered first status of each task that has none on
        disk yet (same spec): the planner then keeps its uid. Given a fixed generation (-1),
        so it reads as unchanged from pass to pass."""
        out, gens = dict(statuses), dict(generations)
        for name, kept in list(self._unrecorded.items()):
            spec = specs.get(name)
            if name in statuses or spec is None or spec.spec_hash != kept.status.spec_hash:
                del self._unrecorded[name]  # on disk now, or the task is gone or edited
                continue
            out[name], gens[name] = kept, -1
        return out, gens

    def _remember_unrecorded(self, name: str, status: TaskStatus) -> None:
        """The first status of `name` could not be written: keep its uid for the next pass."""
        body = status.status
        if name in self._unrecorded or not body.uid or not body.spec_hash or not body.queued_at:
            return
        first = lifecycle.first_queued(body.uid, body.spec_hash, body.queued_at)
        self._unrecorded[name] = status.model_copy(update={"status": first})

    def _skip(self, plan: Plan, observed: Observation) -> Plan:
        """A still pass: the last plan stands; only deferred writes and the heartbeat run."""
        self.skipped += 1
        self._deadline = plan.deadline
        self._count_pass("walk" if self._walking else "still")
        self._flush()
        now = self.clock()
        self.state.last_pass_at = now
        self.state.passes += 1
        if plan.summary is not None:
            self.observer.heartbeat(now, plan.summary, ray_available=observed.available)
        self.report.census(plan.statuses)
        return plan

    def _flush(self) -> None:
        """Write this pass's share of the deferred sidecars. A flush that used its whole
        budget leaves a backlog (10,000 new specs: 40 passes of 256), which the loop clears at
        busy_interval_seconds rather than at the interval (next_wait)."""
        budget = self.settings.status_write_budget
        written = self.store.flush_statuses(budget, self.settings.position_write_seconds)
        had_backlog = self._backlog
        self._backlog = written >= budget and self.store.deferred_statuses > 0
        if had_backlog and not self._backlog:
            memory.release_free_memory()  # a start's backlog is written: its peak is past
        if self.metrics is not None:
            self.metrics.deferred_writes.set(self.store.deferred_statuses)

    def _count_pass(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.count_pass(kind)

    def _write_statuses(
        self,
        plan: Plan,
        before: Mapping[str, TaskStatus],
        classes: writes.WriteClasses,
        *,
        only: AbstractSet[str] | None = None,
        skip: AbstractSet[str] = frozenset(),
    ) -> set[str]:
        """Write the statuses that changed, each as its class says
        (reconciler/shell/loop/writes.py);
        return the names whose write failed."""
        unwritten: set[str] = set()
        # Only the changed statuses: the planner names every one in write_classes (tested in
        # tests/unit/shell/loop/test_write_classes.py), so a pass costs what changed, not every
        # task.
        names = plan.write_classes if only is None else only
        for name in names:
            status = plan.statuses.get(name)
            if status is None or name in skip or before.get(name) is status:
                continue  # the planner hands back the very object it was given: unchanged
            if name in classes.deferred:
                self.store.defer_status(name, status)
                continue
            try:
                # A status the plan gave no class (none should be) is fsynced: the safe side.
                durable = name not in classes.prompt
                written = self.store.write_status(name, status, durable=durable)
                if written:
                    self.faults.crash_point("status_written")
                self._writes_ok += 1
            except OSError as exc:
                unwritten.add(name)
                self._writes_failed += 1
                self._status_writes.failed(f"{name}: {exc}")
                if name not in before:
                    self._remember_unrecorded(name, status)
        return unwritten

    # -- the loop ------------------------------------------------------------------------------
    def run(
        self,
        stop: threading.Event,
        first: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        """Pass, then sleep until woken by a file event or next_wait passes. The first pass runs
        inside `first()` (serve's: reconciler/app/runtime.first_pass_gc)."""
        while not stop.is_set():
            self.wake.clear()
            started = self.monotonic()
            try:
                with first():
                    self.run_pass()
            except Exception:  # the loop must outlive any single bad pass
                log.exception("reconcile pass failed")
            first = nullcontext
            self.wake.wait(self.next_wait(self.monotonic() - started))

    def next_wait(self, elapsed: float = 0.0) -> float:
        """Seconds until the next pass, after a pass that took `elapsed` (shell/loop/timing.py)."""
        state = self.state
        return next_wait(
            self.settings,
            backlog=self._backlog,
            waiting_on_ray=bool(
                state.queued and (state.starting or state.running) and state.ray_error is None
            ),
            quiet_for=self.monotonic() - self._changed_at,
            deadline_in=None if self._deadline is None else self._deadline - self.clock(),
            elapsed=elapsed,
        )
