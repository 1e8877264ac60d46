"""The incremental planner's interface to a pass (reconciler.core.incremental.fastpass).

The full pass (`planner.plan`) runs its stages as functions of frozen values. The fast pass
redoes only part of each stage (some tasks' reconcile, the front of each queue's admission,
the statuses it touched), so it builds one pass piecemeal: `FastPassContext` is that pass in
progress, the per-task stage's builder (`TaskMerge`) with the pass's frozen inputs and what
the later stages have added so far. Its methods run the same stage functions the full pass
runs and add their outcome, so both passes decide alike; `freeze` makes the `Plan`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.core.admission import policies
from reconciler.core.admit import start_task
from reconciler.core.cleanup import expire_finished_jobs, orphan_sidecars, stop_strays
from reconciler.core.decisions import Preemption, RefusedDeletions, Stop, Summary
from reconciler.core.durability import WriteClass, acting
from reconciler.core.inputs import Observation
from reconciler.core.planner import Asked, Collected, Plan, collect_statuses, plan_of
from reconciler.core.queues.dispatch import QueueAdmission
from reconciler.core.queues.usage import QueueUsage
from reconciler.core.stages import PassInputs, TaskMerge, WalkEnd
from reconciler.core.task.step import TaskEnv
from specs.cluster import Capacity
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions
from specs.task.inputs import TaskInput
from specs.task.status import TaskStatus

__all__ = ["FastPassContext"]


@dataclass
class FastPassContext(TaskMerge):
    """A fast pass in progress: the tasks merged so far (`TaskMerge`: the redone ones, and
    the quiet ones admission looks at), and what the later stages added."""

    inputs: PassInputs = field(kw_only=True)
    stops: list[Stop] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    refused_deletions: RefusedDeletions | None = None
    delete_statuses: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    statuses: dict[str, TaskStatus] = field(default_factory=dict)  # those set anew
    write_classes: dict[str, WriteClass] = field(default_factory=dict)
    order: dict[str, list[str]] = field(default_factory=dict)  # waiting, per queue, in order
    not_considered: int = 0  # waiting tasks past the bound of admission's walk
    walk: WalkEnd | None = None  # where the one queue's walk ended
    queue_admission: QueueAdmission | None = None  # the team queues' admission
    # On an autoscaling cluster: the tasks that wait for new nodes, and what the plan asks
    # the autoscaler for (planner.scale_request).
    scale_demand: list[str] = field(default_factory=list)
    scale_request: tuple[Capacity, ...] | None = None
    # Preemptors whose victims all stopped (preemptions.ready), found over every task.
    ready: frozenset[str] = frozenset()

    @property
    def options(self) -> PlanOptions:
        return self.inputs.options

    @property
    def obs(self) -> Observation:
        return self.inputs.obs

    @property
    def now(self) -> float:
        return self.inputs.now

    @property
    def stamp(self) -> datetime:
        return self.inputs.stamp

    @property
    def env(self) -> TaskEnv:
        return self.inputs.env

    @property
    def queues(self) -> QueueConfig | None:
        return self.inputs.queues

    @property
    def usage(self) -> QueueUsage | None:
        return self.inputs.usage

    @property
    def queue_error(self) -> str | None:
        return self.inputs.queue_error

    def start(self, candidate: policies.Candidate) -> None:
        """Start `candidate`, as admission does (admit.start_task)."""
        name = candidate.name
        begun = start_task(self.inputs, candidate, self.bodies[name], self.tasks[name])
        self.bodies[name] = begun.body
        self.used = self.used + candidate.request
        self.unobserved = self.unobserved + candidate.request
        self.submits.append(begun.submit)
        self.events.append(begun.event)

    def stop_strays(self, specs: Mapping[str, TaskInput]) -> None:
        """The stray-jobs stage (cleanup.stop_strays) over the tasks merged so far."""
        strays = stop_strays(self.inputs, specs, self.kept_jobs, self.bodies, self.holdings)
        held = strays.holdings
        self.used, self.in_use, self.unobserved = held.used, dict(held.in_use), held.unobserved
        self.stops.extend(strays.stops)
        self.refused_deletions = strays.refused
        self.events.extend(strays.events)

    def expire_finished_jobs(self, statuses: Mapping[str, TaskStatus]) -> None:
        """Ray's history to drop (cleanup.expire_finished_jobs), judged by `statuses`."""
        expiry = expire_finished_jobs(self.inputs, statuses)
        self.deletes = list(expiry.deletes)
        self.until = min(self.until, expiry.until)

    def orphan_sidecars(
        self, specs: Mapping[str, TaskInput], statuses: Mapping[str, TaskStatus]
    ) -> None:
        """The sidecars of `statuses` without a spec to delete (cleanup.orphan_sidecars)."""
        self.delete_statuses.extend(
            orphan_sidecars(self.inputs, specs, statuses, self.stops, self.refused_deletions)
        )

    def collect_statuses(self, statuses: Mapping[str, TaskStatus], names: Iterable[str]) -> None:
        """The statuses of `names` (planner.collect_statuses), after every stage above."""
        acts = acting(self.submits, self.stops, self.timeouts, self.preemptions)
        known = self.queue_admission.queue_of if self.queue_admission is not None else {}
        collected = collect_statuses(
            self.inputs, self.bodies, self.conds, known, statuses, acts, names
        )
        self.statuses.update(collected.statuses)
        self.write_classes.update(collected.write_classes)

    def asked(self) -> Asked:
        return Asked(
            submits=self.submits,
            stops=self.stops,
            timeouts=self.timeouts,
            preemptions=self.preemptions,
            delete_statuses=self.delete_statuses,
            fetch_logs=self.fetch_logs,
            deletes=self.deletes,
            events=self.events,
            refused_deletions=self.refused_deletions,
        )

    def freeze(
        self,
        statuses: Mapping[str, TaskStatus],
        out: Mapping[str, TaskStatus],
        summary: Summary,
        touched: Iterable[str],
    ) -> Plan:
        """The plan, as `planner.finish` builds it, with every status `out` (the given ones,
        but for `touched`) and the summary the fast pass kept."""
        asked = self.asked()
        still = (
            asked.nothing(self.inputs)
            and len(out) == len(statuses)
            and all(statuses.get(name) is out[name] for name in touched)
        )
        collected = Collected(self.statuses, self.write_classes)
        return plan_of(
            self.now,
            asked,
            collected,
            out,
            summary,
            self.until,
            self.recorded_until,
            self.scale_request,
            still,
        )
