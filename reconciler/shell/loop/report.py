"""What a pass reports once it has acted: the loop's state for the API, the metrics and the
resource history (through PassObserver), and `_queues.status.yaml`.

Kept out of the loop so the loop stays the order of reads, writes and Ray calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from reconciler.core.planner import Observation, Plan, TaskInput
from reconciler.core.queues import QueueState, dispatch
from reconciler.core.task import lifecycle
from reconciler.shell.loop.lastseen import LoopState
from reconciler.shell.loop.queuefile import Loaded, QueueFile, UsageBook
from reconciler.shell.ops.counts import Tally
from reconciler.shell.ops.metrics import QueueMetrics
from reconciler.shell.ops.recorder import PassObserver
from reconciler.shell.ops.runhistory import RunLedger, with_observed
from specs.cluster import Census
from specs.queues.config import DEFAULT_QUEUE
from specs.task.models import Phase
from specs.task.status import TaskStatus, TaskStatusBody

audit_log = logging.getLogger("rayqueue.audit")
log = logging.getLogger(__name__)


class PassReport:
    """Reports each pass's plan. `input_of(name)`: the planner input a task was planned from."""

    def __init__(
        self,
        state: LoopState,
        observer: PassObserver,
        metrics: QueueMetrics | None,
        queue_file: QueueFile,
        usage: UsageBook,
        input_of: Callable[[str], TaskInput | None],
        clock: Callable[[], float],
        ledger: RunLedger | None = None,
        latest_census: Callable[[], Census | None] = lambda: None,
    ) -> None:
        """`ledger`: what each live run holds from census to census, and the run history
        (None without a census); `latest_census`: the census thread's last."""
        self.state = state
        self.observer = observer
        self.metrics = metrics
        self.queue_file = queue_file
        self.usage = usage
        self.input_of = input_of
        self.clock = clock
        self.ledger = ledger
        self.latest_census = latest_census
        # The last queue status document as the planner's figures make it, before the
        # census's totals are added to it.
        self._queues_planned: dict[str, object] | None = None
        # The configuration generation whose default queue was last found without CPUs of
        # its own, so that the warning is said once per configuration, not every pass.
        self._default_without_cpu: int | None = None
        # Each status's (queue, phase, reason), counted for _queues.status.yaml and updated by
        # the statuses that changed (a full walk counts them all again).
        self.phases: Tally[tuple[str | None, Phase, str | None]] = Tally(
            lambda s: (s.status.queue, s.status.phase, s.status.reason)
        )

    def stale(self) -> None:
        """A pass failed: the next one counts what its plan changed from all statuses."""
        self.phases.stale()

    def record(
        self,
        plan: Plan,
        before: Mapping[str, TaskStatus],
        observed: Observation,
        *,
        walking: bool,
    ) -> None:
        """The loop's state, the metrics and the history, from what the pass decided."""
        summary = plan.summary
        now = self.clock()
        self.state.last_pass_at = now
        self.state.passes += 1
        if summary is None:
            return
        self.state.used = summary.used
        self.state.queue_order = summary.order
        self.state.queued, self.state.starting, self.state.running = (
            summary.queued,
            summary.starting,
            summary.running,
        )
        # Only the statuses that changed are looked at (the planner names every one of them
        # in write_classes); a full walk looks at all of them again.
        changed = None if walking else plan.write_classes.keys()
        # Priorities only of the tasks whose status changed: the rest count for gauges only.
        priorities: dict[str, int] = {}
        for name in plan.write_classes:
            given = self.input_of(name)
            status = plan.statuses.get(name)
            old = before.get(name)
            if status is None or old is status:
                continue
            if old is not None and lifecycle.stopped_outside(old.status, status.status):
                _audit_stopped_outside(name, status.status)
            task = given.task if given is not None else None
            if task is not None:
                priorities[name] = task.spec.priority
        self.observer.observe(
            now,
            before,
            plan.statuses,
            summary,
            ray_available=observed.available,
            priorities=priorities,
            submitted={submit.task for submit in plan.submits},
            changed=changed,
        )

    def queue_status(self, plan: Plan, queues: Loaded, *, walking: bool) -> None:
        """_queues.status.yaml: each queue's quota, use and counts, and the config's validity."""
        if self.metrics is not None:
            self.metrics.observe_config(queues.config)
        if queues.state is None:
            self.state.queues = None
            if self.metrics is not None:
                self.metrics.observe_queues({})
            return
        admission = plan.summary.queues if plan.summary is not None else None
        if admission is None and queues.config is not None:
            return  # Ray was not asked this pass: keep the last figures
        if self.metrics is not None:
            self.metrics.observe_queues(admission.states if admission is not None else {})
        if admission is not None and queues.config is not None:
            self._warn_of_default_quota(queues.generation, admission.states)
        self.phases.update(plan.statuses, None if walking else plan.write_classes.keys())
        counts: dict[str, tuple[int, int]] = {}
        for key, many in self.phases.counts.items():
            # The core's rule of what counts, applied once per distinct (queue, phase, reason).
            for queue, (pending, admitted) in dispatch.counts_by_queue({"": key}).items():
                was = counts.get(queue, (0, 0))
                counts[queue] = (was[0] + many * pending, was[1] + many * admitted)
        document = dispatch.status_document(
            queues.state,
            admission.states if admission is not None else {},
            admission.weights if admission is not None else {},
            counts,
            admission.oversubscribed if admission is not None else None,
            self.usage.past if queues.config is not None else None,
            self.usage.at,
            queues.config.spec.fair_sharing if queues.config is not None else None,
            admission.limits if admission is not None else None,
            queues.policies if queues.config is not None else None,
        )
        self._queues_planned = document
        self._write_queues()

    def _warn_of_default_quota(self, generation: int, states: Mapping[str, QueueState]) -> None:
        """A WARNING, once per configuration, when the listed quotas leave the `default` queue
        (tasks outside every listed folder, and the legacy API's) no CPU of its own: its tasks
        then start only on what other queues lend, which nothing else would say."""
        default = states.get(DEFAULT_QUEUE)
        if default is None or default.nominal.cpu > 0:
            self._default_without_cpu = None
            return
        if self._default_without_cpu == generation:
            return
        self._default_without_cpu = generation
        log.warning(
            "queue %s (tasks outside every listed folder, and the legacy API's) has a nominal "
            "quota of 0 CPU: the listed nominalQuotas take every CPU of the cluster, so its "
            "tasks start only on what other queues lend. To give it CPUs of its own, lower a "
            "listed nominalQuota (default gets what the cluster has beyond them), or put those "
            "tasks in a listed queue's folder",
            DEFAULT_QUEUE,
        )

    def census(self, statuses: Mapping[str, TaskStatus]) -> None:
        """A census taken since the last pass: each live run's use followed (an ended run's
        record appended to the run history), and each queue's totals into its status. Costs
        nothing until the census thread has a new census."""
        if self.ledger is None:
            return
        census, jobs = self.latest_census(), self.state.jobs
        if census is None or jobs is None or census is self.ledger.seen:
            return

        def queue_of(task: str, submission_id: str) -> str | None:
            status = statuses.get(task)
            body = status.status if status is not None else None
            return body.queue if body is not None and body.submission_id == submission_id else None

        self.ledger.observe(census, jobs, queue_of)
        if self._queues_planned is not None:
            self._write_queues()

    def _write_queues(self) -> None:
        planned = self._queues_planned
        assert planned is not None
        document = with_observed(planned, self.ledger.queues if self.ledger else None)
        self.state.queues = document
        self.queue_file.write_status(document)


def _audit_stopped_outside(name: str, body: TaskStatusBody) -> None:
    """A run of ours ended STOPPED without a stop from us: on one shared Ray cluster any job
    may stop another's through Ray's own API, which rayqueue cannot prevent; it makes it seen
    where the operator looks for who changed what."""
    audit_log.warning(
        "stopped outside rayqueue: run %d of %s (job %s) was stopped in Ray by another client",
        body.run,
        name,
        body.submission_id or "",
    )
