"""The planner's settings: the knobs that decide what a pass does (PlannerSettings), shared by
the Settings of a process and by the planner's PlanOptions."""

from __future__ import annotations

from dataclasses import dataclass, field

from specs.settings.knobs import LOOP, check, knob
from specs.task.visibility import EVERYTHING, Visibility

# The names reconciler.core.admission.policies.POLICIES and reconciler.core.preemption.victims.MODES
# register (specs imports nothing of reconciler's; tests/unit/specs/settings/test_settings.py
# checks that the lists agree).
POLICY_NAMES = ("strict", "backfill", "besteffort")
PREEMPTION_MODES = ("Never", "LowerPriority")


@dataclass(frozen=True, kw_only=True)
class PlannerSettings:
    """The knobs that decide what a pass does: declared once here, shared by Settings (which
    adds the rest) and by the planner's PlanOptions (which adds the resolved queue id)."""

    policy: str = field(
        default="backfill",
        metadata=knob(
            "admission policy (default backfill: EASY backfilling, later tasks start only if "
            "they cannot delay the head; without timeoutSeconds anywhere it behaves exactly as "
            "strict; strict: the head of the queue is never overtaken; besteffort: anything "
            "that fits starts). See docs/scheduling.md",
            flag="--policy",
            commands=LOOP,
            choices=POLICY_NAMES,
            group="planner",
        ),
    )
    """Admission policy: backfill (the default), strict (the legacy scheduler's) or besteffort, the
    names of reconciler.core.admission.policies.POLICIES."""

    # Preemption of the one queue of a folder without a queue file. With a queue file its
    # `preemption:` blocks (withinQueue, gracePeriodSeconds, minRuntimeSeconds,
    # minPreemptorPriority, maxPerTask) are the one place: the CLI refuses these beside it,
    # and the planner reads only the blocks (reconciler/core/preemption/preempt.py, setup).
    preemption: str = field(
        default="Never",
        metadata=knob(
            "preemption within the queue (default Never; LowerPriority: the task the policy "
            "would start next may stop running, preemptible, lower-priority tasks to make "
            "room; they are queued again). See docs/scheduling.md",
            flag="--preemption",
            commands=LOOP,
            choices=PREEMPTION_MODES,
            group="planner",
        ),
    )
    """Never, or LowerPriority (Kueue's withinClusterQueue):
    reconciler.core.preemption.victims.MODES."""

    preemption_grace_seconds: float = field(
        default=30.0,
        metadata=knob(
            "seconds a stopped job gets between SIGTERM and SIGKILL, with --preemption "
            "(default 30; Ray's RAY_JOB_STOP_WAIT_TIME_S, set per job)",
            old_flag="--preemption-grace-seconds",
            commands=LOOP,
            minimum=0,
            maximum=86400,
            group="planner",
        ),
    )
    """Grace between SIGTERM and SIGKILL: given to each job as RAY_JOB_STOP_WAIT_TIME_S in its
    runtime_env env_vars (Ray's supervisor reads it from its own environment) when preemption
    is on."""

    preemption_min_runtime_seconds: float = field(
        default=0.0,
        metadata=knob(
            "a run younger than this is never preempted (default 0)",
            old_flag="--preemption-min-runtime-seconds",
            commands=LOOP,
            minimum=0,
            group="planner",
        ),
    )
    """A run that has been Running for less than this is exempt from preemption."""

    preemption_max_per_task: int = field(
        default=3,
        metadata=knob(
            "a task preempted this often is never preempted again (default 3; 0: no limit)",
            old_flag="--preemption-max-per-task",
            commands=LOOP,
            minimum=0,
            group="planner",
        ),
    )
    """Bounds the work one task can lose to preemption: after this many, it runs to the end.
    On by default: without it a long job on a busy cluster can be preempted again and again."""

    preemption_min_preemptor_priority: int = field(
        default=0,
        metadata=knob(
            "only a waiting task of at least this priority may preempt, within its queue or "
            "by reclaim (default 0: any higher priority); lower ones wait as without preemption",
            old_flag="--preemption-min-preemptor-priority",
            commands=LOOP,
            minimum=0,
            maximum=9,
            group="planner",
        ),
    )
    """Kubernetes' `preemptionPolicy: Never` for the priorities below it: urgent work preempts,
    ordinary work waits, so preemption's waste is spent on the few tasks that need it."""

    max_inflight: int = field(
        default=32,
        metadata=knob(
            "jobs that may be Starting at once (default 32)",
            old_flag="--max-inflight",
            commands=LOOP,
            minimum=1,
            group="planner",
        ),
    )
    """Jobs that may be Starting at once; each holds a supervisor actor in the head's memory."""

    start_timeout_seconds: float = field(
        default=600.0,
        metadata=knob(
            "seconds a job may stay PENDING in Ray (default 600)",
            old_flag="--start-timeout",
            commands=LOOP,
            minimum=0,
            group="planner",
        ),
    )
    """A job PENDING in Ray longer than this is stopped and marked Failed (StartTimeout)."""

    scale_up_timeout_seconds: float = field(
        default=600.0,
        metadata=knob(
            "on an autoscaling cluster, seconds a task waits for the nodes it asked for before "
            "it stops asking for as long again (default 600)",
            commands=LOOP,
            above=0,
            group="planner",
        ),
    )
    """How long a task waits WaitingForScaleUp; then ScaleUpTimeout, and it asks for no nodes
    for as long again, so one impossible request does not keep nodes up."""

    exact_queue_positions: int = field(
        default=100,
        metadata=knob(
            "waiting tasks of each queue whose sidecar shows an exact queuePosition, message "
            "and estimatedStartAt (default 100); those behind show a bucket such as >1000",
            commands=LOOP,
            minimum=1,
            group="planner",
        ),
    )
    """Beyond these places a sidecar shows `queuePositionBucket` (">100", ">1000", ...) and a
    message without the moving parts, so a start at the head rewrites about this many sidecars
    rather than every waiting one (docs/scheduling.md, "Queue positions")."""

    backfill_candidates: int = field(
        default=500,
        metadata=knob(
            "under backfill and besteffort, most waiting tasks tested per queue past the "
            "first that cannot start (default 500); those behind wait NotConsidered",
            commands=LOOP,
            minimum=0,
            group="planner",
        ),
    )
    """Slurm's bf_max_job_test: admission walks each queue from its head and gives up after
    this many candidates past the first that could not start, so a pass costs what the head
    of the queue holds, not its length. Strict stops at that first misfit anyway."""

    lost_grace_seconds: float = field(
        default=60.0,
        metadata=knob(
            "seconds a running job may be missing from Ray before it is Lost",
            old_flag="--lost-grace",
            commands=LOOP,
            minimum=0,
            group="planner",
        ),
    )
    """How long a Running job may be missing from Ray before it counts as Lost."""

    max_stops_per_pass: int = field(
        default=10,
        metadata=knob(
            "most jobs stopped in one pass for deleted specs (0: no limit)",
            old_flag="--max-stops-per-pass",
            commands=LOOP,
            minimum=0,
            group="planner",
        ),
    )
    """Most jobs stopped in one pass because their specs vanished; 0 means no limit."""

    allow_mass_delete: bool = field(
        default=False,
        metadata=knob(
            "carry out deletions beyond --max-stops-per-pass",
            old_flag="--allow-mass-delete",
            commands=LOOP,
            group="planner",
        ),
    )
    """Carry out deletions beyond max_stops_per_pass instead of holding them."""

    count_foreign_jobs: bool = field(
        default=False,
        metadata=knob(
            "subtract other clients' Ray jobs from free capacity",
            old_flag="--count-foreign-jobs",
            commands=LOOP,
            group="planner",
        ),
    )
    """Subtract other clients' jobs (their declared entrypoint resources, or what Ray says
    they hold if more) from free capacity. Without it they count only by what Ray says they
    hold, when that is read (reconciler/core/charges.py)."""

    ray_history_retention_seconds: float | None = field(
        default=None,
        metadata=knob(
            "delete this queue's finished jobs from Ray this long after they ended, once the "
            "outcome is in the sidecar (default: keep them; Ray's job list then grows forever)",
            old_flag="--ray-history-retention",
            commands=LOOP,
            metavar="SECONDS",
            minimum=0,
            group="planner",
        ),
    )
    """Delete our finished jobs from Ray this long after they ended, once their outcome is in
    the sidecar; keeps list_jobs (and so every pass) from growing with history. None: keep."""

    max_deletes_per_pass: int = field(
        default=100,
        metadata=knob(
            "most finished jobs deleted from Ray in one pass, with --ray-history-retention",
            commands=LOOP,
            minimum=1,
            group="planner",
        ),
    )
    """Bounds the Ray calls one pass spends on deleting old jobs; the rest go in later passes."""

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True, kw_only=True)
class PlanOptions(PlannerSettings):
    """The planner's options: the planner group of the settings (declared, with their
    defaults and ranges, in PlannerSettings above), the resolved queue id, and which task may
    see which (from the team tokens file: reconciler/shell/loop/inputs.plan_options)."""

    queue_id: str = "default"
    visibility: Visibility = EVERYTHING
