"""The reconcile loop: read the folder and Ray, plan, write statuses, act on Ray, and report."""

from reconciler.shell.loop.faults import Faults
from reconciler.shell.loop.jobview import JobView
from reconciler.shell.loop.lastseen import LoopState
from reconciler.shell.loop.queuefile import QueueFile
from reconciler.shell.loop.report import PassReport
from reconciler.shell.loop.runner import Reconciler

__all__ = ["Faults", "JobView", "LoopState", "PassReport", "QueueFile", "Reconciler"]
