"""Preemption: each queue's rules, who may preempt whom (within a queue, reclaiming lent quota,
between sibling queues by share), and the cheapest set of victims."""
