"""/docs and /redoc in a real browser under the API's Content-Security-Policy: the vendored
Swagger UI and ReDoc render, and nothing on the pages breaks the policy except ReDoc's
"powered by" logo from its vendor's CDN, which the policy blocks on purpose.

Chromium comes from Debian's package (`apt-get install -y chromium`); skipped without it.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from api.app import create_app
from specs.settings.process import Settings
from tests.support.net import free_port


@pytest.fixture
def base_url(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    app = create_app(Settings(tasks_dir=tmp_path, port=port))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    started = threading.Event()
    while not server.started and thread.is_alive():
        started.wait(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.mark.parametrize(
    ("path", "selector", "text"),
    [("/docs", ".swagger-ui .info .title", "rayqueue"), ("/redoc", "h1", "rayqueue (0.1.0)")],
)
def test_the_vendored_docs_render_under_the_csp(
    base_url: str, path: str, selector: str, text: str
) -> None:
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            outside: list[str] = []
            here = (base_url, f"blob:{base_url}")  # ReDoc's search worker is built from a blob
            page.on("request", lambda r: None if r.url.startswith(here) else outside.append(r.url))
            page.goto(base_url + path)
            page.wait_for_selector(selector, timeout=30_000)
            assert page.inner_text(selector).startswith(text)
            # Every search index, worker and style the page needs came from this server.
            page.wait_for_load_state("networkidle")
        finally:
            browser.close()
    allowed = [e for e in errors if "cdn.redoc.ly" in e and "Content Security Policy" in e]
    assert [e for e in errors if e not in allowed] == []
    assert all("cdn.redoc.ly" in url for url in outside), outside
