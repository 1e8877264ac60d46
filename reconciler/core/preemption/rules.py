"""Each queue's preemption rules for a pass: from the queue file's `preemption:` blocks (a
field left out takes the declared default), or, without a queue file, from the `serve` flags;
and which tasks could ever be preempted, so only they get a grace period."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reconciler.core.preemption.victims import NEVER, Rules
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions

ONE_QUEUE = ""
"""The key of the only queue when no `_queues.yaml` is in force."""


@dataclass(frozen=True)
class QueueRules:
    rules: Rules
    grace_seconds: float


@dataclass(frozen=True)
class Setup:
    """Each queue's resolved rules, and which queues' runs may ever be victims."""

    queues: Mapping[str, QueueRules]
    config: QueueConfig | None
    # fairSharing.preemptionStrategies: a queue of lower weighted share may stop a sibling's
    # runs (pure sharing, core/preemption/betweenqueues.py)
    fair: bool = False

    def queue_of(self, task: str) -> str:
        return self.config.queue_of(task) if self.config is not None else ONE_QUEUE

    def rules(self) -> dict[str, Rules]:
        return {name: q.rules for name, q in self.queues.items()}

    @property
    def any_on(self) -> bool:
        return self.fair or any(_can_preempt(q.rules) for q in self.queues.values())

    def stop_wait(self, task: str) -> float | None:
        """The grace period a task's job gets when stopped, or None while nothing could ever
        preempt it (then Ray's own default stays)."""
        queue = self.queue_of(task)
        own = self.queues.get(queue)
        if own is None:
            return None
        exposed = (
            self.fair
            or own.rules.within_queue != NEVER
            or any(
                q.rules.reclaim_within_cohort != NEVER
                for name, q in self.queues.items()
                if name != queue
            )
        )
        return own.grace_seconds if exposed else None


def _can_preempt(rules: Rules) -> bool:
    return rules.within_queue != NEVER or rules.reclaim_within_cohort != NEVER


def setup(config: QueueConfig | None, options: PlanOptions) -> Setup:
    """Without a queue file the settings are the one queue's rules; with one, each queue's
    `preemption:` block is, a field left out taking the declared default (the CLI refuses the
    preemption flags then), `maxPerTask` included."""
    if config is not None:  # one place: the file, with no rules that merge it with the flags
        options = PlanOptions()
    flags = QueueRules(
        Rules(
            options.preemption,
            options.preemption_min_runtime_seconds,
            options.preemption_max_per_task,
            min_preemptor_priority=options.preemption_min_preemptor_priority,
        ),
        options.preemption_grace_seconds,
    )
    if config is None:
        return Setup({ONE_QUEUE: flags}, None)
    queues: dict[str, QueueRules] = {}
    for name in config.queue_names():
        block = config.preemption_of(name)
        rules = Rules(
            block.within_queue if block.within_queue is not None else flags.rules.within_queue,
            (
                block.min_runtime_seconds
                if block.min_runtime_seconds is not None
                else flags.rules.min_runtime_seconds
            ),
            block.max_per_task if block.max_per_task is not None else flags.rules.max_per_task,
            block.reclaim_within_cohort or NEVER,
            (
                block.min_preemptor_priority
                if block.min_preemptor_priority is not None
                else flags.rules.min_preemptor_priority
            ),
        )
        grace = block.grace_period_seconds
        queues[name] = QueueRules(rules, grace if grace is not None else flags.grace_seconds)
    return Setup(queues, config, config.spec.fair_sharing.preempts)
