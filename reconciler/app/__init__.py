"""The composition root of `rayqueue serve`: settings in, store, Ray, loop, watcher and HTTP
API wired together (daemon.py, assembly.py), and the process-wide setup it applies."""

from reconciler.app.assembly import build_reconciler, start_loop, start_watcher
from reconciler.app.daemon import ServeError, serve

__all__ = ["ServeError", "build_reconciler", "serve", "start_loop", "start_watcher"]
