"""One log format: uvicorn's and Ray's records come out through our handler, access logs off."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from reconciler.app.logsetup import setup_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    names = ["", "uvicorn", "uvicorn.error", "uvicorn.access", "ray"]
    saved = {
        n: (
            list(logging.getLogger(n).handlers),
            logging.getLogger(n).propagate,
            logging.getLogger(n).level,
            logging.getLogger(n).disabled,
        )
        for n in names
    }
    yield
    for n, (handlers, propagate, level, disabled) in saved.items():
        logger = logging.getLogger(n)
        logger.handlers[:] = handlers
        logger.propagate, logger.disabled = propagate, disabled
        logger.setLevel(level)


def test_foreign_loggers_use_our_format(restore_logging: None) -> None:
    foreign = logging.StreamHandler(io.StringIO())
    logging.getLogger("ray").addHandler(foreign)  # as `import ray` does
    logging.getLogger("ray").propagate = False
    out = io.StringIO()
    setup_logging(kind="text", stream=out)
    logging.getLogger("rayqueue.loop").info("ours")
    logging.getLogger("uvicorn.error").info("Application startup complete.")
    logging.getLogger("ray.dashboard.modules.dashboard_sdk").info("Uploading package")
    logging.getLogger("uvicorn.access").info('127.0.0.1 - "GET /ui/api/tasks HTTP/1.1" 200')
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert all(" INFO " in line and ": " in line for line in lines)
    assert lines[1].endswith("uvicorn.error: Application startup complete.")
    assert "\t" not in out.getvalue()
    assert foreign not in logging.getLogger("ray").handlers


def test_json_lines_and_access_log_on_request(restore_logging: None) -> None:
    out = io.StringIO()
    setup_logging(kind="json", access_log=True, stream=out)
    setup_logging(kind="json", access_log=True, stream=out)  # again: still one handler
    logging.getLogger("uvicorn.access").info("GET /metrics 200")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("rayqueue.loop").exception("pass failed")
    first, second = (json.loads(line) for line in out.getvalue().splitlines()[:2])
    assert first["logger"] == "uvicorn.access" and first["message"] == "GET /metrics 200"
    assert first["level"] == "INFO" and first["time"].endswith("Z")
    assert second["level"] == "ERROR" and "ValueError: boom" in second["exc"]
    assert len(out.getvalue().splitlines()) == 2
