"""Settings for one rayqueue process: built once by the CLI and passed down, never global.

Every knob is declared once, here: its type and default (the dataclass field), and in the
field's metadata its group (loop, API or planner), its command-line flag or, for a tuning
knob, its environment variable, its help text and the values it accepts (a range or a list
of choices). The CLI derives its flags and the environment it reads from this declaration
(reconciler/cli/flags.py); the planner's PlanOptions share the planner group's fields; and
every dataclass here checks its values when it is built, so a bad value is refused in one
place with one message, whether it came from a flag, the environment or code.

A few knobs are flags, those a user of `serve` sets; the tuning knobs are read from
`RAYQUEUE_<NAME>` (the field name in capitals), listed in docs/settings.md. A tuning knob that
used to be a flag keeps it as `old_flag`: still accepted, hidden from --help, with a warning.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import NoneType, UnionType

from specs.cluster import Capacity
from specs.models import MAX_ARRAY_ELEMENTS
from specs.queues import parse_capacity

DEFAULT_PORT = 8264  # the old scheduler's port, kept so old clients need no change

# Which commands take a knob. `plan` plans with serve's planner and options, so it takes every
# option that decides what the planner does (it reads no git sources and does not confine
# runtimeEnv paths: see reconciler/cli/plan.py).
SERVE = ("serve",)
LOOP = ("serve", "plan")

# The groups a knob belongs to, in `serve --help` order, with their titles.
GROUPS = {
    "loop": "loop: the folder, Ray and the process",
    "api": "HTTP API and access",
    "planner": "planner: what a pass starts and stops",
}

LOG_FORMATS = ("text", "json")
# The names reconciler.core.policies.POLICIES and reconciler.core.victims.MODES register (specs
# imports nothing of reconciler's; tests/unit/test_settings.py checks that the lists agree).
POLICY_NAMES = ("strict", "backfill", "besteffort")
PREEMPTION_MODES = ("Never", "LowerPriority")

ENV_PREFIX = "RAYQUEUE_"

# Host patterns as Starlette's TrustedHostMiddleware takes them, and browser origins.
_HOST_PATTERN = re.compile(r"\*|(\*\.)?[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]")
_ORIGIN = re.compile(r"https?://([A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")


def address_from_env(environ: dict[str, str] | None = None) -> str | None:
    """The old service's RAY_DASHBOARD_ADDRESS first, then Ray's own RAY_ADDRESS."""
    env = os.environ if environ is None else environ
    return env.get("RAY_DASHBOARD_ADDRESS") or env.get("RAY_ADDRESS") or None


@dataclass(frozen=True)
class Knob:
    """How one setting is given (a flag, or the environment) and which values it accepts."""

    flag: str | None = None  # None: a tuning knob, read from RAYQUEUE_<NAME>
    help: str = ""
    commands: tuple[str, ...] = SERVE
    metavar: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None  # an exclusive minimum: the value must be greater
    choices: tuple[str, ...] | None = None
    group: str = "loop"
    old_flag: str | None = None  # a tuning knob's retired flag: accepted with a warning

    @property
    def tuning(self) -> bool:
        return self.flag is None

    def label(self, name: str) -> str:
        return self.flag or self.old_flag or name

    def problem(self, name: str, value: object, label: str | None = None) -> str | None:
        """Why `value` is refused, in words that name the flag (or `label`); None if fine."""
        label = label or self.label(name)
        if self.choices is not None and value is not None and value not in self.choices:
            return f"{label} must be one of {', '.join(self.choices)}, not {value!r}"
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        low, high = self.minimum, self.maximum
        if value != value:  # NaN compares false with everything, so it would pass the ranges
            return f"{label} must be a number, not {value}"
        if low is not None and high is not None and not low <= value <= high:
            return f"{label} must be between {low:g} and {high:g}, not {value:g}"
        if low is not None and value < low:
            return f"{label} must be at least {low:g}, not {value:g}"
        if high is not None and value > high:
            return f"{label} must be at most {high:g}, not {value:g}"
        if self.above is not None and not value > self.above:
            return f"{label} must be greater than {self.above:g}, not {value:g}"
        return None


def knob(
    help: str = "",
    *,
    flag: str | None = None,
    commands: tuple[str, ...] = SERVE,
    metavar: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    choices: tuple[str, ...] | None = None,
    group: str = "loop",
    old_flag: str | None = None,
) -> dict[str, Knob]:
    """The metadata of a Settings field: `field(default=..., metadata=knob(...))`."""
    if group not in GROUPS:
        raise ValueError(f"knob group {group!r} is not one of {', '.join(GROUPS)}")
    return {
        "knob": Knob(
            flag, help, commands, metavar, minimum, maximum, above, choices, group, old_flag
        )
    }


def env_name(name: str) -> str:
    """The environment variable of a tuning knob: RAYQUEUE_ and the field name in capitals."""
    return ENV_PREFIX + name.upper()


def _check(obj: object) -> None:
    """Refuse a value its knob does not accept (ValueError naming the flag or field)."""
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        declared = f.metadata.get("knob")
        if isinstance(declared, Knob):
            problem = declared.problem(f.name, getattr(obj, f.name))
            if problem is not None:
                raise ValueError(problem)


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
    """Admission policy: backfill (the default), strict (the old service's) or besteffort, the
    names of reconciler.core.policies.POLICIES."""

    # Preemption of the one queue of a folder without a queue file. With a queue file its
    # `preemption:` blocks (withinQueue, gracePeriodSeconds, minRuntimeSeconds,
    # minPreemptorPriority, maxPerTask) are the one place: the CLI refuses these beside it,
    # and the planner reads only the blocks (reconciler/core/preemption.py, setup).
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
    """Never, or LowerPriority (Kueue's withinClusterQueue): reconciler.core.victims.MODES."""

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
    On by default: without it one job was preempted 80 times on a real trace (issue 25)."""

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
    """Jobs that may be Starting at once; each holds a ~85 MB supervisor actor on the head."""

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
    """Subtract other clients' jobs (their declared entrypoint resources) from free capacity."""

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
        _check(self)


@dataclass(frozen=True)
class Settings(PlannerSettings):
    tasks_dir: Path
    """The watched folder of `*.yaml` task specs; subfolders are namespaces."""

    address: str | None = None
    """Ray dashboard address (http://host:8265). None: start a private local Ray head."""

    ray_gcs_address: str | None = field(
        default=None,
        metadata=knob(
            "the Ray head's GCS, host:port, where requests to Ray's autoscaler go "
            "(default: the --address host, port 6379)",
            commands=LOOP,
            metavar="HOST:PORT",
        ),
    )
    """Where rayqueue sends its resource request on an autoscaling cluster (issue 26). Default:
    the --address host on Ray's default GCS port 6379, which KubeRay's head service has beside
    the dashboard's 8265; set it only when the GCS is elsewhere."""

    status_dir: Path | None = None
    """Where sidecars go instead of beside the specs (for read-only git checkouts)."""

    state_dir: Path | None = field(
        default=None,
        metadata=knob(
            "folder for resource history and the lock (default: <dir>/.rayqueue)",
            flag="--state-dir",
        ),
    )
    """Our own files (resource history, lock). Default: <tasks_dir>/.rayqueue."""

    queues_path: Path | None = field(
        default=None,
        metadata=knob(
            "team queues with quotas and fair sharing (kind QueueConfig; default: "
            "<dir>/_queues.yaml if it exists). See README, Team queues",
            flag="--queues",
            commands=LOOP,
            metavar="PATH",
        ),
    )
    """The team queues' configuration. Default: <tasks_dir>/_queues.yaml; with no such file
    there is one queue for all tasks, as before queues existed."""

    max_capacity: str | None = field(
        default=None,
        metadata=knob(
            "on an autoscaling cluster, the most it can grow to, e.g. cpu=64,gpu=8,memory=512Gi "
            "(a resource left out is 0); lowers what Ray's autoscaler reports. See "
            "docs/autoscaling.md",
            flag="--max-capacity",
            commands=LOOP,
            metavar="cpu=N,gpu=N,memory=Q",
        ),
    )
    """The cluster's ceiling where Ray does not report one (or a budget below it); with
    `_queues.yaml`'s spec.cluster.maxCapacity the smaller of the two holds."""

    queue_id: str | None = field(
        default=None,
        metadata=knob(
            "tag for this queue's Ray jobs (default: derived from the folder path)",
            flag="--queue-id",
            commands=LOOP,
        ),
    )
    """Marks this queue's Ray jobs. Default: derived from the tasks folder's absolute path."""

    host: str = field(
        default="127.0.0.1",
        metadata=knob("HTTP bind address (default 127.0.0.1)", flag="--host", group="api"),
    )
    """HTTP API bind address."""

    port: int = field(
        default=DEFAULT_PORT,
        metadata=knob(
            f"HTTP port ({DEFAULT_PORT})", flag="--port", minimum=1, maximum=65535, group="api"
        ),
    )
    """HTTP API port."""

    api: bool = field(
        default=True,
        metadata=knob("run the loop without the HTTP API", old_flag="--no-api", group="api"),
    )
    """Serve the HTTP API beside the loop."""

    interval_seconds: float = field(
        default=1.0,
        metadata=knob("seconds between full passes (default 1)", old_flag="--interval", above=0),
    )
    """Time between full passes when nothing wakes the loop earlier. Not 0: it also paces the
    backoff while Ray is unreachable."""

    busy_interval_seconds: float = field(default=0.1, metadata=knob(minimum=0))
    """Time between passes while a backlog of deferred sidecars is written out."""

    capacity_refresh_seconds: float = field(default=0.9, metadata=knob(minimum=0))
    """A capacity read is reused this long, so fast polling does not re-list the nodes."""

    ray_timeout_seconds: float = field(default=10.0, metadata=knob(minimum=0, above=0))
    """Timeout of every single call to the Ray dashboard."""

    max_backoff_seconds: float = field(default=30.0, metadata=knob(minimum=0, above=0))
    """Ceiling of the exponential backoff while Ray is unreachable."""

    history_max_bytes: int = field(default=10 * 2**20, metadata=knob(minimum=0))
    """resource_history.jsonl is rotated past this size (three old files are kept)."""

    history_heartbeat_seconds: float = field(
        default=60.0,
        metadata=knob(
            "seconds between resource history lines while nothing changes (default 60; a "
            "change is written at once)",
            old_flag="--history-heartbeat",
            minimum=1,
        ),
    )
    """resource_history.jsonl gets a line when a value changes, else one per this interval."""

    git_revision: bool = field(
        default=True,
        metadata=knob(
            "do not record the git commit of each run's spec (status.source, Ray job metadata)",
            old_flag="--no-git-revision",
        ),
    )
    """Record the commit each run's spec came from when the tasks folder is in a git tree."""

    metrics_auth: bool = field(
        default=False,
        metadata=knob(
            "make /metrics require the API token too (default: readable without, like /healthz)",
            old_flag="--metrics-auth",
            group="api",
        ),
    )
    """/metrics needs the API token as well; off so a Prometheus scrape needs no secret."""

    log_format: str = field(
        default="text",
        metadata=knob(
            "log line format: text (default) or json, for log collectors",
            flag="--log-format",
            choices=LOG_FORMATS,
        ),
    )
    """One format for every log line of serve, ours, uvicorn's and Ray's: text or json."""

    access_log: bool = field(
        default=False,
        metadata=knob(
            "log every HTTP request (off by default: the web view polls)",
            old_flag="--access-log",
            group="api",
        ),
    )
    """uvicorn's access log, one line per HTTP request."""

    log_tail_lines: int = field(default=50, metadata=knob(minimum=0))
    """Lines of a failed job's log kept in its status."""

    max_array_elements: int = field(
        default=MAX_ARRAY_ELEMENTS, metadata=knob(minimum=1, commands=(*LOOP, "validate"))
    )
    """An array task of more elements than this is Invalid (read by serve, plan, validate and
    the API: every parse of a spec)."""

    local_num_cpus: float | None = field(
        default=None,
        metadata=knob(
            "CPUs the embedded local Ray head declares", old_flag="--num-cpus", minimum=0
        ),
    )
    """CPUs the embedded local Ray head declares (default: what Ray detects)."""

    standby: bool = field(
        default=False,
        metadata=knob(
            "if another serve holds this folder's lock, wait and take over when it exits",
            flag="--standby",
        ),
    )
    """If another serve holds the state folder's lock, wait and take over when it dies."""

    rescan_seconds: float = field(
        default=30.0,
        metadata=knob(
            "seconds between full walks of the folder; in between, only the files that file "
            "events name are read (default 30)",
            old_flag="--rescan-interval",
            minimum=0,
        ),
    )
    """Between full walks of the folder (and rereads of every sidecar) the loop trusts file
    events; a full walk also follows any watcher error or restart. 0: walk on every pass."""

    rescan_cpu_share: float = field(
        default=0.01,
        metadata=knob(
            "stretch --rescan-interval so that full walks use at most this share of a core "
            "(default 0.01; 0: walk every --rescan-interval whatever it costs)",
            flag="--rescan-cpu-share",
            minimum=0,
            maximum=1,
        ),
    )
    """The periodic full walk may use at most this share of one core on average: when a walk
    of a big folder costs more CPU than rescan_seconds x this, the next one waits that much
    longer (a 0.55 s walk of 10,000 specs: every 55 s rather than 30). Events are still read
    at once, and a watcher error or restart still walks at once. 0: no stretching."""

    settle_seconds: float = field(default=1.0, metadata=knob(minimum=0))
    """A changed, new or vanished spec file counts only once unchanged this long (half-written
    files and git checkouts midway are never read as edits or deletions). 0: at once."""

    position_write_seconds: float = field(default=10.0, metadata=knob(minimum=0))
    """A status change the next pass can derive again and no one acts on (a waiting task's
    queue position, its "N tasks ahead" message, a new task's first Queued record) waits in
    memory and reaches its sidecar within this long; a queue that reorders every pass then
    rewrites each sidecar at most this often. 0: every pass (within the budget below)."""

    status_write_budget: int = field(default=256, metadata=knob(minimum=1))
    """At most this many of those deferred sidecars are written per pass (new records first,
    then the longest stale), so a folder of 10,000 new specs does not write 10,000 files in
    one pass. Statuses that record a decision (a submission, a stop, a finished run) are never
    deferred nor counted here."""

    api_token: str | None = None
    """Bearer token the HTTP API requires; None: --token-file, else $RAYQUEUE_API_TOKEN."""

    token_file: Path | None = field(
        default=None,
        metadata=knob(
            "read the API's bearer token from this file (a Docker or Kubernetes secret) "
            "instead of $RAYQUEUE_API_TOKEN",
            flag="--token-file",
            metavar="PATH",
            group="api",
        ),
    )
    """A file holding the bearer token (surrounding whitespace ignored); read once at start."""

    team_tokens: Path | None = field(
        default=None,
        metadata=knob(
            "YAML file of named tokens (sha256 only) with a role: read, write (under given "
            "folders) or admin. See docs/deploy.md",
            flag="--team-tokens",
            metavar="PATH",
            group="api",
        ),
    )
    """Team-scoped tokens (specs/access.py); read once at start."""

    allowed_hosts: tuple[str, ...] = field(
        default=(),
        metadata=knob(
            "Host header names the API answers besides loopback and --host, comma-separated "
            "or repeated; '*.example.com' matches subdomains, '*' turns the check off",
            flag="--allowed-hosts",
            metavar="HOST[,HOST]",
            group="api",
        ),
    )
    """Host names accepted besides the loopback ones and the --host address (DNS rebinding)."""

    allowed_origins: tuple[str, ...] = field(
        default=(),
        metadata=knob(
            "web origins (https://host[:port]) besides the API's own that may send POST, PUT, "
            "PATCH and DELETE from a browser; comma-separated or repeated",
            old_flag="--allowed-origins",
            metavar="ORIGIN[,ORIGIN]",
            group="api",
        ),
    )
    """Browser origins allowed to change things, besides the API's own."""

    working_dir_roots: tuple[str, ...] = field(
        default=(),
        metadata=knob(
            "a folder under which a spec's runtimeEnv may name local paths (working_dir, "
            "py_modules, pip/uv/conda files), which Ray reads from this machine; repeat for "
            "more. With this or --team-tokens, any other local path is refused. See "
            "docs/deploy.md, Tenant isolation",
            flag="--working-dir-root",
            metavar="PATH",
            group="api",
        ),
    )
    """Roots for runtimeEnv local paths, for every writer (team tokens add their own
    workingDirRoots). Empty and no team tokens: local paths are not confined (a warning)."""

    insecure_no_auth: bool = field(
        default=False,
        metadata=knob(
            "serve the API on a non-loopback --host without any token (only behind a "
            "firewall or an authenticating proxy); warns at every start",
            old_flag="--insecure-no-auth",
            group="api",
        ),
    )
    """Allow a non-loopback listener without a token."""

    def __post_init__(self) -> None:
        _check(self)
        for host in self.allowed_hosts:
            if not _HOST_PATTERN.fullmatch(host):
                raise ValueError(
                    f"--allowed-hosts: {host!r} is not a host name, an address, '*.domain' or '*'"
                )
        if self.max_capacity is not None:
            try:
                parse_capacity(self.max_capacity)
            except ValueError as exc:
                raise ValueError(f"--max-capacity: {exc}") from None
        for root in self.working_dir_roots:
            if not os.path.isabs(root):
                raise ValueError(f"--working-dir-root: {root!r} must be an absolute path")
        for origin in self.allowed_origins:
            if not _ORIGIN.fullmatch(origin):
                raise ValueError(
                    f"--allowed-origins: {origin!r} is not an origin like https://host[:port] "
                    "(scheme and host, no path)"
                )

    @property
    def max_capacity_value(self) -> Capacity | None:
        """--max-capacity as resources; None when not given."""
        return parse_capacity(self.max_capacity) if self.max_capacity is not None else None

    @property
    def resolved_state_dir(self) -> Path:
        return self.state_dir or self.tasks_dir / ".rayqueue"

    @property
    def resolved_queue_id(self) -> str:
        if self.queue_id:
            return self.queue_id
        digest = hashlib.sha256(str(self.tasks_dir.absolute()).encode()).hexdigest()
        return f"q-{digest[:10]}"

    def plan_options(self) -> PlanOptions:
        """What the planner needs of these settings: the planner group, and the queue id."""
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(PlannerSettings)}
        return PlanOptions(queue_id=self.resolved_queue_id, **shared)


def knobs() -> Iterator[tuple[str, Knob]]:
    """(field name, Knob) of every declared knob, in declaration order."""
    for f in dataclasses.fields(Settings):
        knob = f.metadata.get("knob")
        if isinstance(knob, Knob):
            yield f.name, knob


def value_type(name: str) -> type:
    """The type a knob's value has, without `| None` (int, float, str, bool, Path, or tuple
    for a tuple of strings)."""
    hint = typing.get_type_hints(Settings)[name]
    if typing.get_origin(hint) is tuple:
        return tuple  # a list of strings: the flag is repeated or comma-separated
    if isinstance(hint, UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not NoneType)
    if not isinstance(hint, type):
        raise TypeError(f"setting {name} has no simple type: {hint!r}")
    return hint


@dataclass(frozen=True, kw_only=True)
class PlanOptions(PlannerSettings):
    """The planner's options: the planner group of the settings (declared, with their
    defaults and ranges, in PlannerSettings above) and the resolved queue id."""

    queue_id: str = "default"
