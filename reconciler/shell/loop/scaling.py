"""The loop's side of autoscaling: what the cluster can grow to, each pass, and the
resource request, sent to Ray's autoscaler only when it changes (and again now and then).

`reconciler.core.scaling` decides; this module reads the autoscaler at the capacity read's
pace, sends the plan's `scale_request`, and keeps the two metrics."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from prometheus_client import CollectorRegistry, Gauge, Histogram

from reconciler.core import scaling
from specs.cluster import Autoscaler, Capacity, RayError, Scaling
from specs.queues.config import ClusterSection
from specs.task.quantity import plural

log = logging.getLogger("rayqueue.loop")

# The autoscaler keeps a request until it is replaced, but a restarted head (or autoscaler)
# forgets it: the standing target is sent again this often even when it has not changed.
RESEND_SECONDS = 60.0
# From a second (a node already booting) to an hour (a cloud short of GPUs).
START_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600)


def combine(
    report: Scaling | None,
    section: ClusterSection | None = None,
    max_capacity: Capacity | None = None,
) -> Scaling | None:
    """One Scaling for the planner. Ray's report (RayAutoscaler.scaling) says whether the
    cluster autoscales, what is being launched and what failed, but not how far it may grow:
    a report without node types takes its ceiling and node types from the configuration
    (`_queues.yaml`'s spec.cluster, --max-capacity), and gives nothing (a fixed cluster,
    today's behaviour) when there is none. A report that does carry node types is joined by
    `core.scaling.from_config` as it is."""
    if report is None or report.node_types:
        return scaling.from_config(report, section, max_capacity)
    configured = scaling.from_config(None, section, max_capacity)
    if configured is None:
        return None
    return replace(
        configured, source="autoscaler", pending=report.pending, failures=report.failures
    )


class AutoscalerMetrics:
    """rayqueue_autoscaler_requested{resource} and the time from a request to the starts it
    served, registered in the process's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requested = Gauge(
            "rayqueue_autoscaler_requested",
            "What rayqueue asks Ray's autoscaler to make room for (what runs and what waits "
            "for nodes), by resource; 0 when nothing waits",
            ["resource"],
            registry=registry,
        )
        self.start_after_request = Histogram(
            "rayqueue_autoscaler_request_to_start_seconds",
            "Time from the request for nodes (nothing asked before) to each task start "
            "while it stands",
            buckets=START_BUCKETS,
            registry=registry,
        )

    def set_requested(self, bundles: Sequence[Capacity]) -> None:
        total = Capacity()
        for bundle in bundles:
            total = total + bundle
        self.requested.labels(resource="cpu").set(total.cpu)
        self.requested.labels(resource="gpu").set(total.gpu)
        self.requested.labels(resource="memory").set(total.memory)


class ScaleRequests:
    """Sends a plan's scale_request to the autoscaler when it differs from the last one sent,
    or when the last was sent RESEND_SECONDS ago; a new process sends its first at once."""

    def __init__(self, autoscaler: Autoscaler, metrics: AutoscalerMetrics | None = None) -> None:
        self.autoscaler = autoscaler
        self.metrics = metrics
        self.sent: tuple[Capacity, ...] | None = None
        self.sent_at = -float("inf")
        self.since: float | None = None  # when the standing non-empty request began
        self.calls = 0  # how many requests reached the autoscaler (for tests)
        # After a failed request (each may wait out a timeout), the next try waits, doubling.
        self.failures = 0
        self.retry_at = -float("inf")

    def act(self, target: tuple[Capacity, ...] | None, now: float, starts: int) -> None:
        """After a pass: `target` is the plan's scale_request, `starts` its submits."""
        if starts and self.since is not None and self.metrics is not None:
            for _ in range(starts):
                self.metrics.start_after_request.observe(max(0.0, now - self.since))
        if target is None:
            return  # a fixed cluster, or Ray unreadable: leave the standing request alone
        if target == self.sent and now - self.sent_at < RESEND_SECONDS:
            return
        if now < self.retry_at:
            return
        try:
            self.autoscaler.request(target)
        except RayError as exc:
            self.failures += 1
            self.retry_at = now + min(RESEND_SECONDS, 2.0 ** min(self.failures, 10))
            level = logging.WARNING if self.failures == 1 else logging.DEBUG
            log.log(level, "cannot ask the autoscaler for %d bundles: %s", len(target), exc)
            return
        if self.failures:
            log.info("the autoscaler takes requests again")
        self.failures, self.retry_at = 0, -float("inf")
        self.calls += 1
        if target != self.sent:
            log.info("asked the autoscaler for %s", _words(target))
        self.sent, self.sent_at = target, now
        if not target:
            self.since = None
        elif self.since is None:
            self.since = now
        if self.metrics is not None:
            self.metrics.set_requested(target)


def _words(bundles: Sequence[Capacity]) -> str:
    if not bundles:
        return "nothing (request cleared)"
    total = Capacity()
    for bundle in bundles:
        total = total + bundle
    return f"{plural(len(bundles), 'bundle')}, {total.cpu:g} CPU, {total.gpu:g} GPU in all"
