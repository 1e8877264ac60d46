"""`head.json` in the state folder: the Ray dashboard address a running `rayqueue serve` uses.

Serve writes it once Ray is known (its private head, or the one it was given) and removes it
on exit. `logs`, `plan` and `describe` read it when no --address or environment variable
says where Ray is. A record whose process is gone (a SIGKILL leaves it behind) is stale and
ignored; the process is recognised by its pid and, on Linux, its start time, so a recycled
pid does not revive a dead record.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from specs.folder.atomic import write_atomic

RECORD_NAME = "head.json"


@dataclass(frozen=True)
class HeadRecord:
    address: str
    pid: int
    private: bool  # a head serve started itself (it goes when serve goes)
    process_start: str | None = None  # /proc/<pid>/stat start time, where there is one

    def to_json(self) -> str:
        return json.dumps(
            {
                "address": self.address,
                "pid": self.pid,
                "private": self.private,
                "processStart": self.process_start,
            },
            indent=2,
        )


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; fields resume after the last ")".
    rest = text[text.rfind(")") + 2 :].split()
    return rest[19] if len(rest) > 19 else None


def process_alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, but someone else's
    return started is None or process_start(pid) in (None, started)


def write(state_dir: Path, address: str, *, private: bool) -> Path:
    path = state_dir / RECORD_NAME
    record = HeadRecord(address, os.getpid(), private, process_start(os.getpid()))
    state_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(path, record.to_json().encode())
    return path


def remove(state_dir: Path) -> None:
    """Remove the record if it is this process's (a successor may have written its own)."""
    path = state_dir / RECORD_NAME
    record = read(path)
    if record is not None and record.pid != os.getpid():
        return
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def read(path: Path) -> HeadRecord | None:
    """The record as written; None if absent or unreadable."""
    try:
        data = json.loads(path.read_text())
        return HeadRecord(
            address=str(data["address"]),
            pid=int(data["pid"]),
            private=bool(data.get("private", False)),
            process_start=data.get("processStart"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Lookup:
    """What the CLI found: an address to use, or why there is none."""

    address: str | None
    note: str  # one line for stderr: which address is used, or why the record was ignored
    stale: bool = False  # a record was there, but not usable


def lookup(state_dir: Path) -> Lookup:
    path = state_dir / RECORD_NAME
    record = read(path)
    if record is None:
        if path.exists():
            return Lookup(None, f"ignoring {path}: it cannot be read", stale=True)
        return Lookup(None, f"no running `rayqueue serve` recorded in {path}")
    if not process_alive(record.pid, record.process_start):
        return Lookup(
            None,
            f"ignoring {path}: rayqueue serve (pid {record.pid}) is no longer running",
            stale=True,
        )
    kind = "private Ray head" if record.private else "Ray"
    return Lookup(
        record.address,
        f"using the {kind} of rayqueue serve (pid {record.pid}) at {record.address}, from {path}",
    )
