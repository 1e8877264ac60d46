"""Fault injection for the crash-anywhere tests: SIGKILL ourselves at a named point of a pass.

Off unless `rayqueue serve` was started with `RAYQUEUE_CRASH_AT=<point>:<nth>[:<delay_ms>]`.
`serve` reads the variable once, at start-up, into a `Faults` object that it hands to the
loop; importing this module reads nothing. The loop calls `faults.crash_point(name)` at the
places where a crash is most dangerous:

- `status_written`  after each sidecar write that changed the file;
- `before_submit`   the run's submission id is on disk, `submit_job` not yet called;
- `after_submit`    Ray has the job, no pass has recorded what Ray says about it;
- `before_stop`     the end of a run is on disk, `stop_job` not yet called;
- `after_stop`      `stop_job` returned;
- `before_delete_status`  a deleted task's job has ended, its sidecar is still there.
- `before_preempt_stop`  a preemption is on disk (the victims' sidecars say Preempted), the
  victim's `stop_job` not yet called;
- `after_preempt_stop`   a victim's `stop_job` returned; the preemptor is not submitted yet
  (that waits for a later pass, once Ray reports the victims stopped).

At the `nth` time the point is reached the process dies with SIGKILL: no finally blocks, no
flushing, exactly like the OOM killer or a power cut. With `delay_ms`, the kill is fired from a
timer thread that many milliseconds later instead, so it lands *inside* the Ray call that
follows the point (e.g. mid-way through the HTTP request of `stop_job`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger("rayqueue.faults")

ENV = "RAYQUEUE_CRASH_AT"
POINTS = frozenset(
    {
        "status_written",
        "before_submit",
        "after_submit",
        "before_stop",
        "after_stop",
        "before_delete_status",
        "before_preempt_stop",
        "after_preempt_stop",
    }
)


class FaultSpecError(ValueError):
    """RAYQUEUE_CRASH_AT is malformed; refusing to start beats silently not crashing."""


@dataclass
class Faults:
    """Where to crash, if anywhere. The default object never crashes."""

    point: str | None = None
    nth: int = 1
    delay_ms: int = 0
    hits: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def parse(cls, spec: str) -> Faults:
        parts = spec.strip().split(":")
        if not 1 <= len(parts) <= 3 or parts[0] not in POINTS:
            raise FaultSpecError(
                f"{ENV}={spec!r}: expected <point>:<nth>[:<delay_ms>] with point one of "
                + ", ".join(sorted(POINTS))
            )
        try:
            nth = int(parts[1]) if len(parts) > 1 else 1
            delay_ms = int(parts[2]) if len(parts) > 2 else 0
        except ValueError:
            raise FaultSpecError(f"{ENV}={spec!r}: nth and delay_ms must be integers") from None
        if nth < 1 or delay_ms < 0:
            raise FaultSpecError(f"{ENV}={spec!r}: nth must be >= 1 and delay_ms >= 0")
        return cls(point=parts[0], nth=nth, delay_ms=delay_ms)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Faults:
        spec = environ.get(ENV, "")
        return cls.parse(spec) if spec else cls()

    @property
    def armed(self) -> bool:
        return self.point is not None

    def crash_point(self, name: str) -> None:
        """Count a visit to `name`; die here (or `delay_ms` from now) at the nth visit."""
        if self.point != name:
            return
        with self._lock:
            self.hits[name] += 1
            if self.hits[name] != self.nth:
                return
        log.warning("fault injection: SIGKILL at %s #%d", name, self.nth)
        if self.delay_ms:
            timer = threading.Timer(self.delay_ms / 1000, _kill_self)
            timer.daemon = True
            timer.start()
        else:
            _kill_self()


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
