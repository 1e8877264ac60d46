"""Settings for one rayqueue process: built once by the CLI and passed down, never global."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PORT = 8264  # the old scheduler's port, kept so old clients need no change


def address_from_env(environ: dict[str, str] | None = None) -> str | None:
    """The old service's RAY_DASHBOARD_ADDRESS first, then Ray's own RAY_ADDRESS."""
    env = os.environ if environ is None else environ
    return env.get("RAY_DASHBOARD_ADDRESS") or env.get("RAY_ADDRESS") or None


@dataclass(frozen=True)
class Settings:
    tasks_dir: Path
    """The watched folder of `*.yaml` task specs; subfolders are namespaces."""

    address: str | None = None
    """Ray dashboard address (http://host:8265). None: start a private local Ray head."""

    status_dir: Path | None = None
    """Where sidecars go instead of beside the specs (for read-only git checkouts)."""

    state_dir: Path | None = None
    """Our own files (resource history, lock). Default: <tasks_dir>/.rayqueue."""

    queue_id: str | None = None
    """Marks this queue's Ray jobs. Default: derived from the tasks folder's absolute path."""

    host: str = "127.0.0.1"
    """HTTP API bind address."""

    port: int = DEFAULT_PORT
    """HTTP API port."""

    api: bool = True
    """Serve the HTTP API beside the loop."""

    interval_seconds: float = 1.0
    """Time between full passes when nothing wakes the loop earlier."""

    busy_interval_seconds: float = 0.1
    """Time between passes while tasks wait and jobs run, so finished jobs free room sooner."""

    capacity_refresh_seconds: float = 0.9
    """A capacity read is reused this long, so fast polling does not re-list the nodes."""

    policy: str = "strict"
    """Admission policy: strict (the old service's), backfill or besteffort."""

    max_inflight: int = 32
    """Jobs that may be Starting at once; each holds a ~85 MB supervisor actor on the head."""

    start_timeout_seconds: float = 600.0
    """A job PENDING in Ray longer than this is stopped and marked Failed (StartTimeout)."""

    lost_grace_seconds: float = 60.0
    """How long a Running job may be missing from Ray before it counts as Lost."""

    max_stops_per_pass: int = 10
    """Most jobs stopped in one pass because their specs vanished; 0 means no limit."""

    allow_mass_delete: bool = False
    """Carry out deletions beyond max_stops_per_pass instead of holding them."""

    count_foreign_jobs: bool = False
    """Subtract other clients' jobs (their declared entrypoint resources) from free capacity."""

    ray_history_retention_seconds: float | None = None
    """Delete our finished jobs from Ray this long after they ended, once their outcome is in
    the sidecar; keeps list_jobs (and so every pass) from growing with history. None: keep."""

    ray_timeout_seconds: float = 10.0
    """Timeout of every single call to the Ray dashboard."""

    max_backoff_seconds: float = 30.0
    """Ceiling of the exponential backoff while Ray is unreachable."""

    history_max_bytes: int = 10 * 2**20
    """resource_history.jsonl is rotated past this size (three old files are kept)."""

    log_tail_lines: int = 50
    """Lines of a failed job's log kept in its status."""

    local_num_cpus: float | None = None
    """CPUs the embedded local Ray head declares (default: what Ray detects)."""

    standby: bool = False
    """If another serve holds the state folder's lock, wait and take over when it dies."""

    settle_seconds: float = 1.0
    """A changed, new or vanished spec file counts only once unchanged this long (half-written
    files and git checkouts midway are never read as edits or deletions). 0: at once."""

    api_token: str | None = None
    """Bearer token the HTTP API requires; None: $RAYQUEUE_API_TOKEN, or no auth if unset."""

    @property
    def resolved_state_dir(self) -> Path:
        return self.state_dir or self.tasks_dir / ".rayqueue"

    @property
    def resolved_queue_id(self) -> str:
        if self.queue_id:
            return self.queue_id
        digest = hashlib.sha256(str(self.tasks_dir.absolute()).encode()).hexdigest()
        return f"q-{digest[:10]}"
