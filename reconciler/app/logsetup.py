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
import re
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

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


# Characters that would end or bend a line of the text log: C0 and C1 controls (newline,
# carriage return, escape, ...) and Unicode's line and paragraph separators.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def escape(text: str) -> str:
    """`text` on one line: each control character written as its escape (a newline as
    backslash-n), so what a team names (a file, a message) cannot start a line of its own."""
    return _CONTROLS.sub(_escaped, text) if _CONTROLS.search(text) else text


class TextFormatter(logging.Formatter):
    """TEXT_FORMAT, one record a line: the message escaped (`escape`), and every line of a
    traceback indented, so no line of the log but a record's first starts at its margin."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        # Another handler may have cached its own traceback text on the record: not indented.
        cached = record.exc_text
        record.exc_text = None if record.exc_info else cached and _indented(cached)
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = record.message
        record.message = escape(message)
        try:
            return super().formatMessage(record)
        finally:
            record.message = message

    def formatException(self, ei: Any) -> str:
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indented(super().formatStack(stack_info))


def _indented(text: str) -> str:
    return "\n".join("    " + escape(line) for line in text.splitlines())


def formatter(kind: LogFormat) -> logging.Formatter:
    return JsonFormatter() if kind == "json" else TextFormatter()


def chosen_format(log_format: str | None, *, team_tokens: bool) -> LogFormat:
    """The log format serve uses: the one asked for, else JSON when teams share the
    scheduler (`--team-tokens`: what they name is logged, and JSON keeps it a value), else
    text."""
    if log_format == "json" or (log_format is None and team_tokens):
        return "json"
    return "text"


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
