"""The shell around the pure core: the loop, the file watcher, status writes, the Ray
adapter, metrics, history, the lock. It does the I/O the core may not."""
