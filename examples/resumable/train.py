"""A resumable training loop for `spec.resumable: true` (examples/tasks/resumable.yaml).

rayqueue may preempt a run for more urgent work: Ray sends the job SIGTERM, then SIGKILL after
the queue's grace period. This script saves its state when it gets SIGTERM and, on its next run,
resumes when rayqueue says the run follows a preemption (RAYQUEUE_PREEMPTED=1); otherwise it
starts afresh. Every run also gets its number in RAYQUEUE_RUN.

The checkpoint must outlive the job, so it lives in a shared path (CHECKPOINT, default under
/tmp, fine on a one-node cluster; use shared storage on a real one). Ray Train does the same
with `train.report(checkpoint=...)` and `train.get_checkpoint()`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

CHECKPOINT = Path(os.environ.get("CHECKPOINT", "/tmp/rayqueue-resumable-demo/state.json"))
STEPS = int(os.environ.get("STEPS", "120"))
STEP_SECONDS = float(os.environ.get("STEP_SECONDS", "1"))


def save(step: int, loss: float) -> None:
    """Atomically: a SIGKILL halfway leaves the previous checkpoint, never half of one."""
    CHECKPOINT.parent.mkdir(parents=True, exist_ok=True)
    partial = CHECKPOINT.with_suffix(".partial")
    partial.write_text(json.dumps({"step": step, "loss": loss}))
    os.replace(partial, CHECKPOINT)


def load() -> tuple[int, float]:
    if os.environ.get("RAYQUEUE_PREEMPTED") == "1" and CHECKPOINT.is_file():
        state = json.loads(CHECKPOINT.read_text())
        print(f"resumed from step {state['step']}", flush=True)
        return int(state["step"]), float(state["loss"])
    print("starting afresh", flush=True)
    return 0, 1.0


def main() -> int:
    step, loss = load()
    stopping = False

    def on_sigterm(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True  # finish the step in hand, then save: well within the grace period

    signal.signal(signal.SIGTERM, on_sigterm)
    print(f"run {os.environ.get('RAYQUEUE_RUN', '?')}", flush=True)
    while step < STEPS:
        time.sleep(STEP_SECONDS)  # the work of one step
        step, loss = step + 1, loss * 0.97
        print(f"step {step} loss {loss:.4f}", flush=True)
        if stopping:
            save(step, loss)
            print(f"SIGTERM: saved step {step}", flush=True)
            return 143  # 128 + SIGTERM, as if the signal had ended it
    save(step, loss)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
