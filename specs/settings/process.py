"""Settings for one rayqueue process: built once by the CLI and passed down, never global.

Every knob is declared once, here (the planner's in specs/settings/planner.py, with knob() of
specs/settings/knobs.py): its type and default (the dataclass field), and in the field's metadata
its group (loop, API or planner), its command-line flag or, for a tuning knob, its environment
variable, its help text and the values it accepts (a range or a list of choices). The CLI derives
its flags and the environment it reads from this declaration (reconciler/cli/flags.py); the
planner's PlanOptions share the planner group's fields; and every dataclass here checks its values
when it is built, so a bad value is refused in one place with one message, whether it came from a
flag, the environment or code.

A few knobs are flags, those a user of `serve` sets; the tuning knobs are read from
`RAYQUEUE_<NAME>` (the field name in capitals), listed in docs/settings.md. A tuning knob whose flag
is retired keeps it as `old_flag`: still accepted, hidden from --help, with a warning.
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
from specs.queues.config import parse_capacity
from specs.settings.knobs import GROUPS as GROUPS
from specs.settings.knobs import LOOP, check, knob
from specs.settings.knobs import Knob as Knob
from specs.settings.knobs import address_from_env as address_from_env
from specs.settings.knobs import env_name as env_name
from specs.settings.planner import POLICY_NAMES as POLICY_NAMES
from specs.settings.planner import PREEMPTION_MODES as PREEMPTION_MODES
from specs.settings.planner import PlannerSettings as PlannerSettings
from specs.settings.planner import PlanOptions as PlanOptions
from specs.settings.rayaddress import parse_ray_address
from specs.task.models import MAX_ARRAY_ELEMENTS

DEFAULT_PORT = 8264  # the legacy API's port, so its clients need no change

LOG_FORMATS = ("text", "json")

# Host patterns as Starlette's TrustedHostMiddleware takes them, and browser origins.
_HOST_PATTERN = re.compile(r"\*|(\*\.)?[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ORIGIN = re.compile(r"https?://([A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")


@dataclass(frozen=True)
class Settings(PlannerSettings):
    tasks_dir: Path
    """The watched folder of `*.yaml` task specs; subfolders are namespaces."""

    address: str | None = None
    """The Ray address as given: the dashboard's URL (http://host:8265), the GCS's host:port,
    or `auto` (specs/settings/rayaddress.py). None: start a private local Ray head."""

    ray_gcs_address: str | None = field(
        default=None,
        metadata=knob(
            "the Ray head's GCS, host:port, where requests to Ray's autoscaler go "
            "(default: the GCS --address named, else its host, port 6379)",
            commands=LOOP,
            metavar="HOST:PORT",
        ),
    )
    """Where rayqueue sends its resource request on an autoscaling cluster. Default:
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
    there is one queue for all tasks."""

    max_capacity: str | None = field(
        default=None,
        metadata=knob(
            "on an autoscaling cluster, the most it can grow to, e.g. cpu=64,gpu=8,memory=512Gi "
            "(a resource left out is not capped); lowers what Ray's autoscaler reports. See "
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
    """A capacity read is reused this long, so fast polling does not re-list the nodes; Ray's
    whole job listing too, while its live jobs are few (they are looked up by id between)."""

    ray_timeout_seconds: float = field(default=10.0, metadata=knob(minimum=0, above=0))
    """Timeout of every single call to the Ray dashboard."""

    max_backoff_seconds: float = field(default=30.0, metadata=knob(minimum=0, above=0))
    """Ceiling of the exponential backoff while Ray is unreachable."""

    census_seconds: float = field(default=15.0, metadata=knob(minimum=0))
    """Between two censuses of what every Ray job holds (its placement groups, actors and
    running tasks, and its processes' physical use), read from the dashboard on a thread of
    their own, off the reconcile loop's path. 0: no census. Otherwise at least 1 s: each
    census costs the dashboard a few requests."""

    history_max_bytes: int = field(default=10 * 2**20, metadata=knob(minimum=0))
    """resource_history.jsonl and run_history.jsonl are each rotated past this size (three
    old files of each are kept)."""

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

    log_format: str | None = field(
        default=None,
        metadata=knob(
            "log line format: text or json, for log collectors (default: json with "
            "--team-tokens, else text)",
            flag="--log-format",
            choices=LOG_FORMATS,
        ),
    )
    """One format for every log line of serve, ours, uvicorn's and Ray's: text or json; None:
    json when teams share the scheduler (team_tokens), else text."""

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

    queue_depth: int = field(default=3, metadata=knob(minimum=1, maximum=10))
    """Most levels of nested queues (a top queue is 1, its sub-queue 2); a deeper one is an
    error in its `_queues.yaml`, and the last good configuration stays in force."""

    local_num_cpus: float | None = field(
        default=None,
        metadata=knob(
            "CPUs the embedded local Ray head declares", old_flag="--num-cpus", minimum=0
        ),
    )
    """CPUs the embedded local Ray head declares (default: what Ray detects)."""

    head_env: tuple[str, ...] = field(
        default=(),
        metadata=knob(
            "variables of serve's environment the embedded local Ray head, and so every job "
            "on it, gets besides what Ray needs; comma-separated names"
        ),
    )
    """Every job of the embedded head inherits the head's environment, which holds only what
    Ray needs (reconciler/shell/raycluster/local_head.py) and these names: the operator's keys
    stay with serve unless listed. serve refuses to pass its own API token."""

    single_user_head: bool = field(
        default=False,
        metadata=knob(
            "with --team-tokens and the embedded local Ray head, do not warn at start that "
            "every job runs as serve's user on its host"
        ),
    )
    """The operator accepts that jobs on the embedded head share serve's user and host (one
    team in fact, or a host of its own); the start-up warning is then not given."""

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
            "stretch RAYQUEUE_RESCAN_SECONDS so that full walks use at most this share of a core "
            "(default 0.01; 0: walk every RAYQUEUE_RESCAN_SECONDS whatever it costs)",
            flag="--rescan-cpu-share",
            minimum=0,
            maximum=1,
        ),
    )
    """The periodic full walk may use at most this share of one core on average: when a walk of a
    big folder costs more CPU than rescan_seconds x this, the next one waits that much longer (at a
    share of 0.01, a walk that costs 0.5 s of CPU runs every 50 s rather than every 30). Events are
    still read at once, and a watcher error or restart still walks at once. 0: no stretching."""

    settle_seconds: float = field(default=1.0, metadata=knob(minimum=0))
    """A changed, new or vanished spec file counts only once unchanged this long (half-written
    files and git checkouts midway are never read as edits or deletions). 0: at once."""

    position_write_seconds: float = field(default=10.0, metadata=knob(minimum=0))
    """A status change the next pass can derive again and no one acts on (a waiting task's
    queue position, its "N tasks ahead" message, a new task's first Queued record) waits in
    memory; a change to a sidecar that exists reaches it once it has waited this long, at the
    end of a pass, as the budget below allows (the longest waiting first; a first record
    waits only for the budget), so a queue that reorders every pass rewrites each sidecar at
    most this often. 0: every pass (within the budget below)."""

    status_write_budget: int = field(default=256, metadata=knob(minimum=1))
    """At most this many of those deferred sidecars are written per pass (new records first, then
    the longest stale), so a folder of thousands of new specs does not write thousands of files in
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
    """Team-scoped tokens (specs/tenancy/access.py); read once at start."""

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
        check(self)
        if self.address is not None:
            parse_ray_address(self.address)  # a value of no form Ray takes: ValueError, exit 2
        if 0 < self.census_seconds < 1:
            raise ValueError(
                f"RAYQUEUE_CENSUS_SECONDS must be 0 (no census) or at least 1, "
                f"not {self.census_seconds:g}"
            )
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
        for name in self.head_env:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"RAYQUEUE_HEAD_ENV: {name!r} is not a variable name")
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
