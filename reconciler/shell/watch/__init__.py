"""File events: the watcher thread that wakes the loop and tells it which paths changed."""
