"""One `rayqueue serve` per state folder: an flock on `<state-dir>/serve.lock`.

flock belongs to the open file description, so the kernel drops it when the holder dies,
however it dies (SIGKILL included): the lock can never outlive its holder. The descriptor is
not inheritable (Python's default, PEP 446), so a child such as the embedded Ray head cannot
keep it alive either. The file's content only says who holds it, for the refusal message; it is
never what decides.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

LOCK_NAME = "serve.lock"


@dataclass(frozen=True)
class Holder:
    """Who holds the lock, as written into the lock file by the holder."""

    pid: int | None
    hostname: str | None
    started_at: str | None
    tasks_dir: str | None

    def describe(self) -> str:
        if self.pid is None:
            return "an unknown process (the lock file holds no holder information)"
        text = f"pid {self.pid} on {self.hostname or 'an unknown host'}"
        if self.started_at:
            text += f", started {self.started_at}"
        return text


class LockHeld(Exception):
    """Another process holds the lock."""

    def __init__(self, path: Path, holder: Holder) -> None:
        self.path = path
        self.holder = holder
        super().__init__(f"{path} is held by {holder.describe()}")


class StateLock:
    """An exclusive, non-blocking flock with holder information written into the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, *, tasks_dir: Path | None = None) -> None:
        """Take the lock now, or raise LockHeld naming the holder."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise LockHeld(self.path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            info = {
                "pid": os.getpid(),
                "hostname": socket.gethostname(),
                "startedAt": datetime.now(UTC).isoformat(timespec="seconds"),
                "tasksDir": str(tasks_dir.absolute()) if tasks_dir is not None else None,
            }
            # In place, under the lock: a reader that loses the race sees old or partial JSON,
            # which only makes the message vaguer.
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        except OSError:
            pass  # holder information is a courtesy; the flock is what counts
        self._fd = fd

    def wait(
        self,
        stop: threading.Event,
        *,
        tasks_dir: Path | None = None,
        poll_seconds: float = 0.5,
    ) -> bool:
        """Standby: try until the lock is ours (True) or `stop` is set (False)."""
        while not stop.is_set():
            try:
                self.acquire(tasks_dir=tasks_dir)
                return True
            except LockHeld:
                stop.wait(poll_seconds)
        return False

    def holder(self) -> Holder:
        """Who the file says holds the lock (meaningful while someone holds it)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return Holder(None, None, None, None)
        try:
            return _read_holder(fd)
        finally:
            os.close(fd)

    def release(self) -> None:
        """Drop the lock. The file stays: unlinking it would race with a waiting standby."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the last descriptor releases the flock


def _read_holder(fd: int) -> Holder:
    # The holder may be rewriting the file right now: retry briefly on empty or torn JSON.
    for _ in range(5):
        try:
            data = json.loads(os.pread(fd, 4096, 0) or b"null")
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            pid = data.get("pid")
            return Holder(
                pid if isinstance(pid, int) else None,
                str(data.get("hostname")) if data.get("hostname") else None,
                str(data.get("startedAt")) if data.get("startedAt") else None,
                str(data.get("tasksDir")) if data.get("tasksDir") else None,
            )
        time.sleep(0.02)
    return Holder(None, None, None, None)
