"""What a pass reports once it has acted: the loop's state for the API, the metrics and the
resource history (through PassObserver), and `_queues.status.yaml`.

Kept out of the loop so the loop stays the order of reads, writes and Ray calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from reconciler.core.planner import Observation, Plan, TaskInput
from reconciler.core.queues import dispatch
from reconciler.shell.loop.lastseen import LoopState
from reconciler.shell.loop.queuefile import Loaded, QueueFile, UsageBook
from reconciler.shell.ops.counts import Tally
from reconciler.shell.ops.metrics import QueueMetrics
from reconciler.shell.ops.recorder import PassObserver
from specs.task.models import Phase
from specs.task.status import TaskStatus


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
    ) -> None:
        self.state = state
        self.observer = observer
        self.metrics = metrics
        self.queue_file = queue_file
        self.usage = usage
        self.input_of = input_of
        self.clock = clock
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
            task = given.task if given is not None else None
            if status is not None and before.get(name) is not status and task is not None:
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
        self.state.queues = document
        self.queue_file.write_status(document)
