"""A counting HTTP reverse proxy for the sync bench's S3 lanes: how many requests a step made.

    python bench/s3_proxy.py UPSTREAM_PORT      # prints "PORT\\n" once it listens

It listens on a free port of 127.0.0.1 and forwards every request, unchanged (the Host header
too, so SigV4 signatures still match), to the S3 server at 127.0.0.1:UPSTREAM_PORT (moto),
one upstream connection per client connection, and counts them: by method, by kind (the key's
first segment below the lane's prefix: `objects`, `refs`, restic's `data`, `index`, ...; a
bounded table), and the request and response body bytes. `GET /_bench/counts` answers the
counts so far as JSON, `GET /_bench/counts?reset=1` answers them and starts again (no S3
bucket can be named `_bench`, and these requests are not counted). It runs as its own
process, so its threads do not share the bench's interpreter lock.

A body up to 1 MiB is read whole before it is forwarded (so a request on an upstream
connection moto closed meanwhile can be sent again); a larger one is streamed in 1 MiB pieces,
as are answers that declare their length. `Expect: 100-continue` is answered here and not
forwarded. Both sockets run with
TCP_NODELAY: without it, a reply's headers and body (two writes) met the client's delayed ACK,
and every request waited about 40 ms (a clone of 413 objects took 11.7 s through the proxy
against 1.8 s straight to moto).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import sys
import threading
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_KINDS = 32  # distinct kinds counted; the rest are counted as "other"
CHUNK = 1 << 20  # bodies above this are streamed, in pieces of this size
MAX_BODY = 1 << 30  # a request body larger than this is refused (413)
UPSTREAM_TIMEOUT_S = 300.0
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
    }
)


class Counts:
    """What went through since the last reset (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.methods: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.body_up = 0
        self.body_down = 0

    def add(self, method: str, kind: str, status: int, up: int, down: int) -> None:
        with self.lock:
            self.methods[method] += 1
            key = f"{method} {kind}"
            if key not in self.kinds and len(self.kinds) >= MAX_KINDS:
                key = f"{method} other"
            self.kinds[key] += 1
            self.statuses[str(status)] += 1
            self.body_up += up
            self.body_down += down

    def snapshot(self, reset: bool) -> dict[str, Any]:
        with self.lock:
            out = {
                "requests": sum(self.methods.values()),
                "methods": dict(self.methods),
                "kinds": dict(self.kinds),
                "statuses": dict(self.statuses),
                "body_up_bytes": self.body_up,
                "body_down_bytes": self.body_down,
            }
            if reset:
                self.reset()
            return out


def kind_of(target: str) -> str:
    """`/bucket/prefix/objects/ab/...` -> "objects"; a request on the bucket itself is named by
    its query (`list`, `location`, `uploads`...) or "bucket"."""
    parsed = urllib.parse.urlsplit(target)
    parts = [p for p in parsed.path.split("/") if p]
    query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
    if "uploadId" in query or "uploads" in query:
        return "multipart"
    if len(parts) >= 3:
        return parts[2]
    if len(parts) == 2:
        return "config" if parts[1] == "config" else f"{parts[1]} (top)"
    if "list-type" in query or "prefix" in query or "delimiter" in query:
        return "list"
    return next(iter(query), "bucket")


def make_handler(upstream_port: int, counts: Counts) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, and 100-continue answered by the base class
        disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall
        upstream: http.client.HTTPConnection | None = None

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise ValueError(f"request body of {length} bytes")
            return self.rfile.read(length) if length else b""

        def _control(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            data = json.dumps(counts.snapshot(reset="reset" in query)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _connect(self) -> http.client.HTTPConnection:
            if self.upstream is None:
                conn = http.client.HTTPConnection(
                    "127.0.0.1", upstream_port, timeout=UPSTREAM_TIMEOUT_S
                )
                conn.connect()
                assert conn.sock is not None
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.upstream = conn
            return self.upstream

        def _send(self, length: int, body: bytes | None) -> http.client.HTTPResponse:
            """The request upstream: `body` when it was read whole, else `length` bytes
            streamed from the client as they come."""
            conn = self._connect()
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    conn.putheader(name, value)
            if length or self.command in ("PUT", "POST"):
                conn.putheader("Content-Length", str(length))
            if body is not None:
                conn.endheaders(body or None)
            else:
                conn.endheaders()
                left = length
                while left:
                    chunk = self.rfile.read(min(CHUNK, left))
                    if not chunk:
                        raise ConnectionError("the client's body ended early")
                    conn.send(chunk)
                    left -= len(chunk)
            return conn.getresponse()

        def _forward(self) -> None:
            if self.path.startswith("/_bench/"):
                self._control()
                return
            chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.send_error(413)
                return
            # Small bodies are read whole, so a request on an upstream connection that moto
            # closed meanwhile can be sent again; large ones are streamed both ways.
            body = self._body() if chunked or length <= CHUNK else None
            if body is not None:
                length = len(body)
            reply = None
            for attempt in (1, 2):
                try:
                    reply = self._send(length, body)
                    break
                except (http.client.HTTPException, ConnectionError, TimeoutError):
                    if self.upstream is not None:
                        self.upstream.close()
                    self.upstream = None
                    if attempt == 2 or body is None:
                        break
            if reply is None:
                self.send_error(502)
                self.close_connection = True
                return
            self.send_response_only(reply.status, reply.reason)
            for name, value in reply.getheaders():
                if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            declared = reply.getheader("Content-Length")
            down = 0
            if self.command == "HEAD" or reply.status in (204, 304):
                self.send_header("Content-Length", declared or "0")
                self.end_headers()
                reply.read()
            elif declared is not None and not reply.chunked:
                self.send_header("Content-Length", declared)
                self.end_headers()
                while chunk := reply.read(CHUNK):
                    self.wfile.write(chunk)
                    down += len(chunk)
            else:
                data = reply.read()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                down = len(data)
            counts.add(self.command, kind_of(self.path), reply.status, length, down)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward  # noqa: N815 - the base's names

    return Handler


def main(argv: list[str]) -> int:
    upstream = int(argv[0])
    counts = Counts()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(upstream, counts))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
