"""serve's uvicorn server wakes every TICK_SECONDS to check whether to exit, not ten times a
second as uvicorn does (an idle serve spent ~2 ms of CPU a second on it, docs/benchmarks.md),
and refreshes its Date header at each of those ticks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api import server as api_server
from api.server import TICK_SECONDS, Server, uvicorn_config
from specs.settings.process import Settings


def test_the_server_sleeps_a_tick_between_checks_and_stops_at_the_next(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(tasks_dir=tmp_path)
    server = Server(uvicorn_config(object(), settings))
    server.config.load()  # what run() does before main_loop: the headers on_tick reads
    slept: list[float] = []
    counters: list[int] = []
    real_on_tick = server.on_tick

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            server.should_exit = True

    async def on_tick(counter: int) -> bool:
        counters.append(counter)
        return await real_on_tick(counter)

    monkeypatch.setattr(api_server.asyncio, "sleep", sleep)
    monkeypatch.setattr(server, "on_tick", on_tick)
    asyncio.run(server.main_loop())
    assert TICK_SECONDS >= 0.5
    assert slept == [TICK_SECONDS] * 3  # uvicorn.Server sleeps 0.1 s
    assert counters == [0] * 4  # each tick refreshes the Date header (uvicorn: every 10th)
    assert any(name == b"date" for name, _ in server.server_state.default_headers)
