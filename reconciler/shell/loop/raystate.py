"""The Ray side of a pass: Ray's jobs (jobview.py: a listing, or between listings a look-up
of the live ones), a capacity read reused a few seconds, the autoscaler's report, and the
backoff while Ray does not answer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from reconciler.core.planner import Observation
from reconciler.shell.loop.jobview import JobView
from reconciler.shell.loop.lastseen import LoopState
from reconciler.shell.loop.queuefile import QueueFile
from reconciler.shell.loop.repeats import Repeating
from reconciler.shell.loop.scaling import combine
from specs.cluster import Autoscaler, Capacity, RayAdapter, RayError, Scaling
from specs.queues.config import parse_capacity
from specs.settings.process import Settings

log = logging.getLogger("rayqueue.loop")


def observe_ray(ray: RayAdapter, capacity: Callable[[], Capacity] | None = None) -> Observation:
    """What one pass asks of Ray: one job listing, then one capacity read (`capacity` may
    serve a cached one). Raises RayError."""
    jobs = ray.list_jobs()
    cap = capacity() if capacity is not None else ray.capacity()
    return Observation({job.submission_id: job for job in jobs}, cap)


class RayObserver:
    """What the loop asks of Ray each pass, and what it remembers between asks: the backoff
    after failures, the last capacity read and the last autoscaler report. The adapter is
    handed in at each call (the loop's `ray` may be replaced)."""

    def __init__(
        self,
        settings: Settings,
        queue_file: QueueFile,
        autoscaler: Autoscaler | None,
        ray_down: Repeating,
    ) -> None:
        self.settings = settings
        self.queue_file = queue_file
        self.autoscaler = autoscaler
        self.ray_down = ray_down
        self.failures = 0
        self.retry_at = 0.0
        self.capacity_read: tuple[float, Capacity] | None = None
        # Ray's jobs: listed at the capacity read's pace, the live ones looked up in between.
        self.view = JobView(settings.capacity_refresh_seconds)
        self.report: tuple[float, Scaling | None] | None = None
        self.max_capacity = (
            parse_capacity(settings.max_capacity) if settings.max_capacity is not None else None
        )

    def observe(self, ray: RayAdapter, now: float, state: LoopState) -> Observation:
        """One job listing and one capacity read, or the reason we could not have them."""
        if now < self.retry_at:
            return Observation(None, None, f"backing off after: {state.ray_error}")
        try:
            # The jobs first, then the capacity, as observe_ray reads them.
            observed = Observation(self.view.read(ray, now), self.capacity(ray, now))
        except RayError as exc:
            self.view.drop()
            self.failures += 1
            delay = min(
                self.settings.interval_seconds * 2 ** min(self.failures, 30),
                self.settings.max_backoff_seconds,
            )
            self.retry_at = now + delay
            self.capacity_read = None
            state.ray_failures, state.ray_backoff_seconds = self.failures, delay
            state.ray_error = str(exc) or type(exc).__name__
            self.ray_down.failed(state.ray_error)
            return Observation(None, None, state.ray_error)
        self.ray_down.cleared()
        self.failures, self.retry_at = 0, 0.0
        state.ray_failures, state.ray_backoff_seconds = 0, 0.0
        state.ray_error, state.last_ray_ok_at = None, now
        state.capacity = observed.capacity
        state.jobs = observed.jobs
        return replace(observed, scaling=self.scaling(now))

    def scaling(self, now: float) -> Scaling | None:
        """What the cluster can grow to: the autoscaler's report (re-read when the capacity
        is), joined with the configured ceiling. With neither, None: today's fixed cluster."""
        report = None
        if self.autoscaler is not None:
            cached = self.report
            if cached is not None and now - cached[0] < self.settings.capacity_refresh_seconds:
                report = cached[1]
            else:
                try:
                    report = self.autoscaler.scaling()
                except RayError as exc:
                    # The jobs and nodes answered: plan on them, as on a fixed cluster.
                    log.warning("cannot read the autoscaler's report: %s", exc)
                    report = None
                self.report = (now, report)
        config = self.queue_file.load().config
        section = config.spec.cluster if config is not None else None
        return combine(report, section, self.max_capacity)

    def capacity(self, ray: RayAdapter, now: float) -> Capacity:
        """Nodes come and go far more slowly than jobs end, and the dashboard's node listing
        is its costliest call: while the loop polls fast, reuse a capacity read a few seconds."""
        cached = self.capacity_read
        if cached is not None and now - cached[0] < self.settings.capacity_refresh_seconds:
            return cached[1]
        capacity = ray.capacity()
        self.capacity_read = (now, capacity)
        return capacity
