"""File events: the watcher thread that wakes the loop and tells it which paths changed."""

from reconciler.shell.watch.events import FileEvents
from reconciler.shell.watch.watcher import Watcher

__all__ = ["FileEvents", "Watcher"]
