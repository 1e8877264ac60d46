"""The composition root of `rayqueue serve`: settings in, store, Ray, loop, watcher and HTTP
API wired together (daemon.py, assembly.py), and the process-wide setup it applies."""
