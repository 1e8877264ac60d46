"""One kept-alive HTTP/1.1 connection for small GETs, its answers read by hand.

The loop looks up its few live jobs about ten times a second while work waits (jobview.py), a
GET each. Through http.client, each answer's headers go through the email package's parser,
which cost more CPU than the JSON of the job (docs/benchmarks.md, helper `head3`). A GET's
answer needs only its status, its framing (Content-Length or chunked) and whether the server
closes, and that is all this reads. Whatever it cannot read raises the exception types
http.client raises (OSError, http.client.HTTPException), so callers handle failures as before.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
from collections.abc import Mapping

# An answer's status line and headers together; the dashboard's are ~150 bytes.
MAX_HEAD_BYTES = 65536
_RECV_BYTES = 65536
_NO_BODY = frozenset({204, 304})
# A control character could split a header or a request line; a space too, in a path.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOT_IN_TARGET = re.compile(r"[\x00-\x20\x7f]")


class Connection:
    """GETs to one host over one socket, opened on the first request and kept open between
    answers. Not thread-safe (the callers in poll.py hold a lock). After any exception the
    caller closes it; the next request opens a new socket."""

    def __init__(
        self,
        host: str,
        port: int | None,
        *,
        timeout: float,
        context: ssl.SSLContext | None,
        headers: Mapping[str, str],
    ) -> None:
        self.host = host
        self.port = port if port is not None else (443 if context is not None else 80)
        self.timeout = timeout
        self.context = context
        self.sock: socket.socket | None = None
        self._buffer = bytearray()
        default = 443 if context is not None else 80
        authority = host if self.port == default else f"{host}:{self.port}"
        if ":" in host and not host.startswith("["):
            authority = f"[{host}]" if self.port == default else f"[{host}]:{self.port}"
        fields = {"Host": authority, "Accept-Encoding": "identity", **headers}
        lines = []
        for name, value in fields.items():
            if _CONTROL.search(name) or _CONTROL.search(value) or ":" in name:
                raise ValueError(f"a header cannot hold {name!r}: {value!r}")
            lines.append(f"{name}: {value}\r\n")
        self._fields = "".join(lines).encode("latin-1") + b"\r\n"

    def request(self, target: str) -> None:
        """Send GET `target` (a path with its query), opening the socket if none is open."""
        if _NOT_IN_TARGET.search(target) or not target.startswith("/"):
            raise http.client.InvalidURL(f"not a request target: {target!r}")
        if self.sock is None:
            self.sock = self._connect()
        self.sock.sendall(b"GET " + target.encode("ascii") + b" HTTP/1.1\r\n" + self._fields)

    def response(self) -> tuple[int, bytes, bool]:
        """The status and body of the answer to the last request, and whether the server
        closes the connection after it (the socket is then closed here)."""
        while True:
            version, status, fields = self._head()
            if not 100 <= status < 200:
                break  # a 1xx is followed by the real answer
        tokens = {t.strip().lower() for t in fields.get(b"connection", b"").split(b",")}
        closes = b"close" in tokens or (version == b"HTTP/1.0" and b"keep-alive" not in tokens)
        coding = fields.get(b"transfer-encoding")
        length = fields.get(b"content-length")
        if coding is not None:
            if coding.lower().split(b",")[-1].strip() != b"chunked":
                raise http.client.HTTPException(f"unsupported transfer-encoding {coding!r}")
            body = self._chunked()
        elif length is not None:
            try:
                size = int(length)
            except ValueError:
                raise http.client.HTTPException(f"bad content-length {length!r}") from None
            if size < 0:
                raise http.client.HTTPException(f"bad content-length {length!r}")
            body = self._exactly(size)
        elif status in _NO_BODY:
            body = b""
        else:
            body, closes = self._to_close(), True
        if closes:
            self.close()
        return status, body, closes

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self._buffer.clear()
        if sock is not None:
            sock.close()

    # --- reading ------------------------------------------------------------------------------

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is not None:
            try:
                return self.context.wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise
        return sock

    def _recv(self) -> bytes:
        if self.sock is None:
            raise http.client.NotConnected("no request was sent")
        return self.sock.recv(_RECV_BYTES)

    def _head(self) -> tuple[bytes, int, dict[bytes, bytes]]:
        buffer = self._buffer
        searched = 0
        while (end := buffer.find(b"\r\n\r\n", searched)) < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                raise http.client.LineTooLong("the answer's headers")
            searched = max(len(buffer) - 3, 0)
            data = self._recv()
            if not data:
                if not buffer:
                    # What http.client raises when a kept-alive socket was closed by the peer.
                    raise http.client.RemoteDisconnected("closed without an answer")
                raise http.client.IncompleteRead(bytes(buffer))
            buffer += data
        if end > MAX_HEAD_BYTES:
            raise http.client.LineTooLong("the answer's headers")
        lines = bytes(buffer[:end]).split(b"\r\n")
        del buffer[: end + 4]
        parts = lines[0].split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise http.client.BadStatusLine(lines[0].decode("latin-1"))
        fields: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                raise http.client.HTTPException(f"bad header line {line!r}")
            fields[name.strip().lower()] = value.strip()
        return parts[0], int(parts[1]), fields

    def _exactly(self, size: int) -> bytes:
        buffer = self._buffer
        while len(buffer) < size:
            data = self._recv()
            if not data:
                raise http.client.IncompleteRead(bytes(buffer), size - len(buffer))
            buffer += data
        body = bytes(buffer[:size])
        del buffer[:size]
        return body

    def _line(self) -> bytes:
        buffer = self._buffer
        while (end := buffer.find(b"\r\n")) < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                raise http.client.LineTooLong("a chunk's line")
            data = self._recv()
            if not data:
                raise http.client.IncompleteRead(bytes(buffer))
            buffer += data
        line = bytes(buffer[:end])
        del buffer[: end + 2]
        return line

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self._line().split(b";", 1)[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                raise http.client.HTTPException(f"bad chunk size {line!r}") from None
            if size == 0:
                while self._line():
                    pass  # trailer fields, up to the empty line
                return b"".join(parts)
            parts.append(self._exactly(size))
            if self._exactly(2) != b"\r\n":
                raise http.client.HTTPException("a chunk not followed by CRLF")

    def _to_close(self) -> bytes:
        while data := self._recv():
            self._buffer += data
        body = bytes(self._buffer)
        self._buffer.clear()
        return body
