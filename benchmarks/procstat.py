"""CPU time and memory of another process, read from /proc (Linux only).

The idle cost of `rayqueue serve` is measured from outside, on the real process, so that
nothing of the benchmark runs inside it: utime + stime over a window, VmRSS and VmHWM.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of all the process's threads so far (not of its children)."""
    raw = (PROC / str(pid) / "stat").read_text()
    # The command name is in parentheses and may hold spaces; count fields after the last ')'.
    fields = raw.rsplit(")", 1)[1].split()
    # After the name: state is field 3 of proc(5), utime field 14 and stime field 15.
    utime, stime = int(fields[14 - 3]), int(fields[15 - 3])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Memory:
    rss_mb: float  # resident now (VmRSS)
    peak_rss_mb: float  # the most it was ever resident (VmHWM)


def memory(pid: int) -> Memory:
    values: dict[str, float] = {}
    for line in (PROC / str(pid) / "status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            amount, unit = rest.split()
            if unit != "kB":
                raise ValueError(f"unexpected unit in /proc/{pid}/status: {line!r}")
            values[key] = int(amount) / 1024
    return Memory(values["VmRSS"], values["VmHWM"])
