"""The web view in a real browser: `rayqueue serve` on the real Ray fixture, /ui/ in Chromium.

Chromium comes from Debian's package (`apt-get install -y chromium`; `.ci/run` installs it);
Playwright only drives it. Playwright's own browser download does not work on these machines.
On a failure the page is saved as a screenshot under $TMPDIR.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_QUEUE
from tests.support.net import answers, free_port

pytestmark = pytest.mark.ray

TOKEN = "ui-test-token-0123456789abcdef-0123"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPO = Path(__file__).parents[2]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def spec(entrypoint: str, cpu: float, priority: int = 0, **labels: str) -> str:
    doc = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "metadata": {"labels": labels},
        "spec": {"entrypoint": entrypoint, "priority": priority, "resources": {"cpu": cpu}},
    }
    return yaml.safe_dump(doc)


def eventually(check: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what or check}: last {last!r}")


@pytest.fixture
def served(tmp_path: Path, ray_head: str) -> Iterator[tuple[str, Path]]:
    """`rayqueue serve` on a folder with a running, a waiting, a finished and an invalid task."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    queue_id = f"ui-{os.getpid()}-{time.monotonic_ns()}"
    # The fixture head has 4 CPUs: `long` holds 3, so `big` (3) waits behind it.
    (tasks / "long.yaml").write_text(spec("sleep 120", 3, priority=9, team="a"))
    (tasks / "big.yaml").write_text(spec("echo big", 3, priority=1, team="b"))
    (tasks / "quick.yaml").write_text(spec("echo quick", 0.5, priority=5, team="a"))
    (tasks / "broken.yaml").write_text(spec("echo x", 1).replace("priority", "priorty"))
    port = free_port()
    env = {**os.environ, "RAYQUEUE_API_TOKEN": TOKEN}
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler.cli",
                "serve",
                "--dir",
                str(tasks),
                "--address",
                ray_head,
                "--port",
                str(port),
                "--queue-id",
                queue_id,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
        )
    try:
        eventually(
            lambda: proc.poll() is not None or answers(f"http://127.0.0.1:{port}/healthz"),
            60,
            "serve to answer",
        )
        assert proc.poll() is None, log.read_text()
        yield f"http://127.0.0.1:{port}", tasks
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        # Stopping serve leaves its jobs running (by design); the shared head needs them gone.
        ray = RayJobsAdapter(ray_head, timeout_seconds=10)
        for job in ray.list_jobs():
            if job.metadata.get(META_QUEUE) == queue_id and not job.terminal:
                ray.stop(job.submission_id)


def sidecar_phases(tasks: Path) -> dict[str, str]:
    phases = {}
    for path in tasks.glob("*.status.yaml"):
        doc = yaml.safe_load(path.read_text()) or {}
        phases[path.name.removesuffix(".status.yaml")] = doc.get("status", {}).get("phase")
    return phases


def test_web_view_in_chromium(served: tuple[str, Path]) -> None:
    executable = chromium_path()
    if executable is None:
        pytest.skip("no chromium binary found (apt-get install -y chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    base, tasks = served
    shots = Path(os.environ.get("TMPDIR", tempfile.gettempdir()))
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            _check_page(page, base, tasks)
        except BaseException:
            shot = shots / f"rayqueue-ui-failure-{int(time.time())}.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"screenshot of the failing page: {shot}")
            raise
        finally:
            browser.close()


def _check_page(page: Any, base: str, tasks: Path) -> None:
    eventually(lambda: sidecar_phases(tasks).get("long") == "Running", 60, "long to run")
    eventually(lambda: sidecar_phases(tasks).get("quick") == "Succeeded", 60, "quick to finish")
    page.goto(f"{base}/ui/#token={TOKEN}")
    page.wait_for_selector("tr[data-task='long']")
    assert "#token" not in page.url  # taken out of the address bar

    def table_phases() -> dict[str, str]:
        rows = page.query_selector_all("#task-rows tr[data-task]")
        return {r.get_attribute("data-task"): r.get_attribute("data-phase") for r in rows}

    # Each task with the phase its sidecar holds (both are read again until they agree).
    def agree() -> dict[str, str] | None:
        on_disk = sidecar_phases(tasks)
        shown = table_phases()
        return (
            shown
            if set(on_disk) == {"long", "big", "quick", "broken"} and shown == on_disk
            else None
        )

    shown = eventually(agree, 20, "the table to show the sidecars' phases")
    assert shown["long"] == "Running" and shown["big"] == "Queued"
    assert shown["broken"] == "Invalid"
    assert page.inner_text("tr[data-task='long'] td.phase") == "Running"

    # Why the waiting task waits, visible in its row.
    why = page.locator("tr[data-task='big'] td.why")
    assert why.is_visible()
    assert "WaitingForResources" in why.inner_text()
    assert "CPU" in why.inner_text()
    link = page.locator("tr[data-task='long'] a")
    assert "/#/jobs/" in (link.get_attribute("href") or "")

    # Tiles.
    assert page.inner_text("[data-testid='tile-running'] .value") == "1"
    assert page.inner_text("[data-testid='tile-finished'] .value") == "1"  # quick

    # The plot has data points.
    page.wait_for_selector("#plot svg[data-points]")
    points = eventually(
        lambda: int(page.get_attribute("#plot svg", "data-points") or 0), 20, "plot points"
    )
    assert points > 0
    assert page.locator("#plot svg polyline").count() >= 2

    # Filters: by label, then back.
    page.fill("#filter-label", "team=b")
    assert set(table_phases()) == {"big"}
    page.fill("#filter-label", "")

    # A task dropped into the folder appears without a reload.
    page.evaluate("window.__notReloaded = true")
    (tasks / "dropped.yaml").write_text(spec("echo dropped", 3, priority=0, team="c"))
    eventually(lambda: "dropped" in table_phases(), 20, "the dropped task in the table")
    assert page.evaluate("window.__notReloaded") is True

    # Team queues: no panel without a config; with one, the panel and the task's real queue.
    assert page.locator("#queues-section").is_hidden()
    (tasks / "team-a").mkdir()
    (tasks / "team-a" / "extra.yaml").write_text(spec("echo extra", 0.5, priority=3))
    (tasks / "_queues.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "rayqueue/v1",
                "kind": "QueueConfig",
                "spec": {"queues": [{"name": "team-a", "nominalQuota": {"cpu": 1}}]},
            }
        )
    )
    page.wait_for_selector("#queues-section tr[data-queue='team-a']", timeout=20_000)
    assert page.locator("#queues-section").is_visible()
    shown_queues = page.locator("#queue-rows tr").evaluate_all(
        "rows => rows.map(r => r.dataset.queue)"
    )
    assert shown_queues == ["team-a", "default"]
    nominal = page.inner_text("#queue-rows tr[data-queue='team-a'] td:nth-child(2)")
    assert nominal == "1 CPU"  # written by the formatter the CLI uses
    eventually(
        lambda: page.inner_text("tr[data-task='team-a/extra'] td:nth-child(2)") == "team-a",
        20,
        "the task's queue column",
    )
    page.select_option("#filter-queue", "team-a")
    assert set(table_phases()) == {"team-a/extra"}
    page.select_option("#filter-queue", "default")
    assert {"long", "big"} <= set(table_phases()) and "team-a/extra" not in table_phases()

    # Pages: with two rows a page, the table still shows every task (it follows `continue`).
    page.select_option("#filter-queue", "")
    asked: list[str] = []

    def two_a_page(route: Any) -> None:
        url = route.request.url.replace("limit=500", "limit=2")
        asked.append(url)
        route.continue_(url=url)

    every = set(table_phases())
    page.route(lambda url: "/ui/api/tasks?" in url, two_a_page)
    # The sync API runs the handler only while the test is inside a Playwright call.
    eventually(
        lambda: page.wait_for_timeout(200) or any("continue=" in url for url in asked),
        20,
        "a second page asked for",
    )
    eventually(lambda: set(table_phases()) == every, 20, "every task shown from pages")
    assert page.inner_text("#task-count").endswith(f"of {len(every)}")
