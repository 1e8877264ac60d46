"""One task's own life in a pass: its state machine and transitions, following its run,
retries, dependencies, explicit id claims and what it asks of Ray."""
