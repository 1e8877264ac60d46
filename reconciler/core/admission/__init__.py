"""Who starts in a pass: dependency gating, the admission policies (strict, backfill,
best effort), array caps, and why everyone else waits."""
