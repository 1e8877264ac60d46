"""Team queues: quotas, borrowing and lending, fair sharing with decayed usage, the queue tree,
and why each queue's tasks wait."""
