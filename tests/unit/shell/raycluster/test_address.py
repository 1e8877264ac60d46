"""From a Ray address in each form to the dashboard, against stub servers: one answering as
Ray's dashboard does, one answering HTTP as something else, one answering as a gRPC server
(Ray's GCS) does, and a port nothing listens on. The GCS's own answer is the real-Ray test's
(tests/integration/test_ray_address_ray.py); here the read of its key is a stand-in."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reconciler.cli.main import main
from reconciler.shell.raycluster import address
from reconciler.shell.raycluster.address import AddressRefused, NotAnswering, locate

# What a gRPC server (Ray's GCS) sends an HTTP/1.1 request: an HTTP/2 SETTINGS frame, then it
# closes the connection.
GRPC_ANSWER = b"\x00\x00\x18\x04\x00\x00\x00\x00\x00\x00\x04\x00@\x00\x00\x00\x05\x00@\x00"


def _http_server(status: int, body: bytes, content_type: str) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def dashboard() -> Iterator[str]:
    """host:port of a stub answering /api/version as Ray's dashboard does."""
    version = json.dumps({"version": "4", "ray_version": "2.60.0", "ray_commit": "x"}).encode()
    yield from _http_server(200, version, "application/json")


@pytest.fixture
def web_page() -> Iterator[str]:
    """host:port of a web server that is not Ray's: a page for every path."""
    yield from _http_server(200, b"<html>hello</html>", "text/html")


@pytest.fixture
def grpc_like() -> Iterator[str]:
    """host:port of a server answering as a gRPC server does: bytes that are not HTTP/1."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(GRPC_ANSWER)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join(timeout=5)
        listener.close()


@pytest.fixture
def silent() -> str:
    """host:port nothing listens on."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return f"127.0.0.1:{probe.getsockname()[1]}"


def test_a_dashboard_url_is_taken_as_it_is(dashboard: str) -> None:
    located = locate(f"http://{dashboard}/")
    assert located.dashboard == f"http://{dashboard}"
    assert located.gcs is None


def test_host_port_of_a_dashboard_is_the_dashboard(dashboard: str) -> None:
    assert locate(dashboard).dashboard == f"http://{dashboard}"


@pytest.mark.parametrize("form", ["url", "host:port"])
def test_something_else_answering_is_refused_with_what_answered(web_page: str, form: str) -> None:
    given = f"http://{web_page}" if form == "url" else web_page
    with pytest.raises(AddressRefused) as caught:
        locate(given)
    message = str(caught.value)
    assert repr(given) in message  # what was given
    assert "not as a Ray dashboard" in message and "<html>hello" in message  # what answered
    assert "http://HOST:8265" in message and "HOST:6379" in message  # what to give instead


def test_host_port_of_a_gcs_leads_to_the_dashboard_it_records(
    grpc_like: str, dashboard: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def recorded(gcs: str, given: str, timeout_seconds: float) -> str:
        asked.append(gcs)
        return dashboard

    monkeypatch.setattr(address, "dashboard_in_gcs", recorded)
    located = locate(grpc_like)
    assert asked == [grpc_like]
    assert located.dashboard == f"http://{dashboard}"
    assert located.gcs == grpc_like
    assert f"the GCS at {grpc_like} records" in located.how


def test_a_gcs_recording_something_else_is_refused(
    grpc_like: str, web_page: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(address, "dashboard_in_gcs", lambda gcs, given, timeout: web_page)
    with pytest.raises(AddressRefused, match=f"the GCS at {grpc_like} records {web_page}"):
        locate(grpc_like)


def test_a_grpc_server_that_is_no_gcs_is_refused(
    grpc_like: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_gcs(gcs: str, given: str, timeout_seconds: float) -> str:
        raise AddressRefused(f"{gcs} answers, but neither as a Ray dashboard nor as a Ray GCS")

    monkeypatch.setattr(address, "dashboard_in_gcs", no_gcs)
    with pytest.raises(AddressRefused, match="neither as a Ray dashboard nor as a Ray GCS"):
        locate(grpc_like)


@pytest.mark.parametrize("form", ["url", "host:port", "gcs-recorded"])
def test_nothing_answering_is_not_answering(
    silent: str, grpc_like: str, form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(address, "dashboard_in_gcs", lambda gcs, given, timeout: silent)
    given = {"url": f"http://{silent}", "host:port": silent, "gcs-recorded": grpc_like}[form]
    with pytest.raises(NotAnswering, match=silent):
        locate(given, timeout_seconds=2)


def test_auto_reads_the_address_file_of_the_last_head(
    tmp_path: Path, grpc_like: str, dashboard: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(grpc_like + "\n")
    monkeypatch.setattr(address, "dashboard_in_gcs", lambda gcs, given, timeout: dashboard)
    located = locate("auto", environ={"RAY_TMPDIR": str(tmp_path)})
    assert located.dashboard == f"http://{dashboard}"
    assert located.gcs == grpc_like
    assert str(tmp_path / "ray" / "ray_current_cluster") in located.how


def test_auto_without_a_head_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(AddressRefused) as caught:
        locate("auto", environ={"TMPDIR": str(tmp_path)})
    assert str(tmp_path / "ray" / "ray_current_cluster") in str(caught.value)
    assert "HOST:6379" in str(caught.value)


def test_address_file_is_where_ray_puts_it() -> None:
    assert address.address_file({}) == Path("/tmp/ray/ray_current_cluster")
    assert address.address_file({"TMPDIR": "/t", "RAY_TMPDIR": "/r"}) == Path(
        "/r/ray/ray_current_cluster"
    )


# --- every entry refuses at start, exit 2 ---------------------------------------------------


def test_serve_refuses_what_is_not_ray_at_start(
    tmp_path: Path, web_page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["serve", "--dir", str(tmp_path / "tasks"), "--address", web_page])
    err = capsys.readouterr().err
    assert code == 2
    assert repr(web_page) in err and "not as a Ray dashboard" in err and "HOST:6379" in err


def test_serve_refuses_a_ray_client_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["serve", "--dir", str(tmp_path / "tasks"), "--address", "ray://head:10001"])
    assert code == 2
    assert "Ray Client address" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["plan"], ["logs", "train"], ["describe", "train"]])
def test_the_cli_refuses_what_is_not_ray(
    tmp_path: Path, web_page: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "train.yaml").write_text(
        "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: echo hi\n"
    )
    code = main([*command, "--dir", str(tasks), "--address", web_page])
    assert code == 2
    assert "not as a Ray dashboard" in capsys.readouterr().err


def test_the_serve_wait_for_a_gcs_ends_when_told_to_stop(tmp_path: Path, silent: str) -> None:
    from reconciler.app import daemon
    from specs.settings.process import Settings

    settings = Settings(tasks_dir=tmp_path, address=silent)
    stop = threading.Event()
    stop.set()
    assert daemon._waits_for_ray(settings)
    assert daemon._wait_for_ray(settings, stop) is None
    assert not daemon._waits_for_ray(Settings(tasks_dir=tmp_path, address=f"http://{silent}"))
