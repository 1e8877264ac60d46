"""One log format for `rayqueue serve`: ours, and uvicorn's and Ray's loggers go through it.

uvicorn and Ray each install their own handlers and formats (uvicorn's `INFO:     ...`, Ray's
tab-separated `file.py:123 -- ...`) and stop propagation to the root logger. `route_foreign`
takes their handlers away and lets their records propagate to the one root handler set up
here. Ray installs its handler when `ray` is first imported, so the routing is applied again
after that (it is idempotent).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Literal, TextIO

LogFormat = Literal["text", "json"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Loggers of libraries that bring their own handlers.
FOREIGN = ("uvicorn", "uvicorn.error", "uvicorn.access", "ray", "ray.job_submission")
ACCESS_LOGGER = "uvicorn.access"
_MARK = "_rayqueue_handler"  # set on our handler, so a second setup replaces it


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, RFC 3339), level, logger, message, and exc."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def formatter(kind: LogFormat) -> logging.Formatter:
    return JsonFormatter() if kind == "json" else logging.Formatter(TEXT_FORMAT)


def setup_logging(
    *,
    level: int = logging.INFO,
    kind: LogFormat = "text",
    access_log: bool = False,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Install our one handler on the root logger and route the libraries' loggers to it."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _MARK, False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(kind))
    setattr(handler, _MARK, True)
    root.addHandler(handler)
    root.setLevel(level)
    route_foreign(access_log=access_log)
    return handler


def route_foreign(*, access_log: bool = False) -> None:
    """Let uvicorn's and Ray's records reach the root handler, in our format, and nowhere else."""
    for name in FOREIGN:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
        # Our level governs theirs too (uvicorn.Config(log_level=...) would have set its own).
        logger.setLevel(logging.NOTSET)
        logger.disabled = False
    # Access logs are one line per request (the web view polls): off unless asked for.
    access = logging.getLogger(ACCESS_LOGGER)
    access.disabled = not access_log
