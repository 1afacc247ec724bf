"""`till ui`: Mission Control's HTTP server on 127.0.0.1, from the standard library.

Routes (every answer carries guard.SECURITY_HEADERS):
- `GET /` and `GET /static/NAME`: the page and its files (hosts/web/static, no build step).
- `GET /api/overview`: the family's universes (status and fork line each) and the radar.
- `POST /api/call` `{verb, universe, params}`: a read or a small action (calls.READS, ACTIONS).
- `POST /api/preview` and `POST /api/apply` `{verb, universe, params, preview_digest,
  confirm_snapshot}` (an undo: `confirm_operation`): the actions a person confirms
  (calls.CONFIRMED).
- `GET /api/events`: the family's events as server-sent events, live (`Last-Event-ID` or
  `?after=` resumes after a cursor).
An answer is `{"result": ...}`, or `{"error": {code, name, message, next, details}}` with an
HTTP status that says what kind of refusal it is.

A thread per request (a merge's check may run for minutes while the page reads); the server
stops on SIGINT, SIGTERM or SIGHUP.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

from tillage.errors import InternalError, TillageError
from tillage.hosts.web import guard
from tillage.hosts.web.calls import Door, confirm_field
from tillage.verbs.invoke import Settings
from tillage.verbs.ui import (
    HostRefusedError,
    NotOfferedError,
    OriginRefusedError,
    PortInUseError,
    TokenRefusedError,
)

STATIC = Path(__file__).parent / "static"
MAX_BODY = 1 << 20  # a call's JSON body; anything larger is refused unread
SHUTDOWN_WAIT_S = 10.0  # how long a stopping server lets running calls finish
KEEPALIVE_POLLS = 100  # an idle event feed sends a comment every this many polls (~10 s)
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
REFUSALS: dict[str, type[TillageError]] = {
    "host": HostRefusedError,
    "origin": OriginRefusedError,
    "token": TokenRefusedError,
}


def http_status(err: TillageError) -> int:
    """The HTTP status a public error is answered with."""
    name = err.name
    if name in ("ui.stale_preview", "ui.confirm_mismatch", "confirmation_required"):
        return 409
    if name in ("ui.not_offered", "ui.unknown_universe") or err.code == -32061:
        return 404
    if err.code == -32066 or name == "usage":
        return 400
    if err.code in (-32062, -32065):
        return 409
    if name == "internal":
        return 500
    return 422  # refused or failed: a public answer of the verb's own


class MissionControl(ThreadingHTTPServer):
    """One `till ui`: the listening socket, this run's token and the door the calls go
    through."""

    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, settings: Settings, port: int, token: str) -> None:
        try:
            super().__init__(("127.0.0.1", port), Handler)
        except OSError as exc:
            if exc.errno == 98:  # EADDRINUSE
                raise PortInUseError(f"port {port} on 127.0.0.1 is in use") from None
            raise
        self.token = token
        self.door = Door(settings)
        self.stopping = threading.Event()
        self._busy = 0
        self._idle = threading.Condition()

    def working(self) -> Any:
        """Counts a request (or the warm-up) as running while the block runs: the process
        exits only once none runs, since an interpreter that ends while a thread is inside
        SQLite can crash on its way out."""
        import contextlib

        @contextlib.contextmanager
        def counted() -> Iterator[None]:
            with self._idle:
                self._busy += 1
            try:
                yield
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

        return counted()

    def wait_idle(self, timeout: float) -> bool:
        """Waits until no request runs; False when some still did after `timeout` seconds."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/#token={self.token}"


class Handler(BaseHTTPRequestHandler):
    server: MissionControl
    protocol_version = "HTTP/1.1"
    server_version = "tillage-ui"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged: the terminal shows only the URL."""

    # -- methods -----------------------------------------------------------------------------

    def do_GET(self) -> None:
        if not self._allowed("GET"):
            return
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            self._file("index.html")
        elif path.startswith("/static/"):
            self._file(path[len("/static/") :])
        elif path == "/api/overview":
            self._answer(self._overview)
        elif path == "/api/events":
            self._events()
        else:
            self._refuse(404, NotOfferedError(f"nothing is served at {path[:100]!r}"))

    def do_POST(self) -> None:
        if not self._allowed("POST"):
            return
        path = urlsplit(self.path).path
        routes = {"/api/call": self._call, "/api/preview": self._preview, "/api/apply": self._apply}
        route = routes.get(path)
        if route is None:
            self._refuse(404, NotOfferedError(f"nothing is served at {path[:100]!r}"))
            return
        body = self._body()
        if body is not None:
            self._answer(lambda: route(body))

    def do_HEAD(self) -> None:
        self._method_not_allowed()

    def do_PUT(self) -> None:
        self._method_not_allowed()

    def do_DELETE(self) -> None:
        self._method_not_allowed()

    def do_PATCH(self) -> None:
        self._method_not_allowed()

    def do_OPTIONS(self) -> None:
        # No CORS preflight is ever answered: a cross-origin call with a custom header stops here.
        self._method_not_allowed()

    # -- the API -----------------------------------------------------------------------------

    def _overview(self) -> Any:
        door = self.server.door
        cursor = door.latest_cursor()  # first: what happens while the rest is read is after it
        universes = door.universes()
        root = universes[0]
        radar = door.run("radar.scan", Path(root["folder"]), {"family": True})
        claims = door.run("claim.list", Path(root["folder"]), {})
        here = str(door.settings.folder)
        selected = next((u["id"] for u in universes if u["folder"] == here), root["id"])
        return {
            "universes": universes,
            "radar": radar,
            "claims": claims,
            "here": selected,
            "cursor": cursor,
        }

    def _call(self, body: dict[str, Any]) -> Any:
        verb, universe, params = _parts(body)
        return self.server.door.call(verb, universe, params)

    def _preview(self, body: dict[str, Any]) -> Any:
        verb, universe, params = _parts(body)
        return self.server.door.preview(verb, universe, params)

    def _apply(self, body: dict[str, Any]) -> Any:
        verb, universe, params = _parts(body)
        return self.server.door.apply(
            verb,
            universe,
            params,
            preview_digest=body.get("preview_digest"),
            confirmed=body.get(confirm_field(verb)),
        )

    def _events(self) -> None:
        """The family's events as server-sent events: those after `Last-Event-ID` (or
        `?after=`: the overview's `cursor`), else those from now on; a comment now and then
        while idle, so a page gone away is noticed."""
        from tillage.store.store import close_stores_opened_by

        query = parse_qs(urlsplit(self.path).query)
        resume = self.headers.get("Last-Event-ID") or (query.get("after") or [""])[0]
        door = self.server.door
        try:
            after = resume or str(door.latest_cursor())
            stream = _follow(door, door.root_folder(), after)
        except TillageError as err:
            self._refuse(http_status(err), err)
            return
        self.send_response(200)
        self._headers("text/event-stream; charset=utf-8")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        idle = 0
        try:
            self.wfile.write(b": tillage events\n\n")
            self.wfile.flush()
            for event in stream.stream():
                if self.server.stopping.is_set():
                    return
                if event is None:
                    idle += 1
                    if idle >= KEEPALIVE_POLLS:
                        idle = 0
                        self.wfile.write(b": idle\n\n")
                        self.wfile.flush()
                    continue
                from tillage.verbs.wire import to_wire

                doc = json.dumps(to_wire(event), separators=(",", ":"), ensure_ascii=False)
                self.wfile.write(f"id: {event.cursor}\nevent: tillage\ndata: {doc}\n\n".encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            return  # the page went away
        finally:
            close_stores_opened_by(threading.get_ident())

    # -- plumbing ----------------------------------------------------------------------------

    def _allowed(self, method: str, path: str | None = None) -> bool:
        headers = {k.lower(): v for k, v in self.headers.items()}
        refusal = guard.check(
            method,
            urlsplit(self.path).path if path is None else path,
            headers,
            port=self.server.port,
            token=self.server.token,
        )
        if refusal is None:
            return True
        self._refuse(refusal.status, REFUSALS[refusal.error](refusal.message))
        return False

    def _body(self) -> dict[str, Any] | None:
        from tillage.errors import InvalidArgumentError

        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            self._refuse(413, InvalidArgumentError(f"a call's body is at most {MAX_BODY} bytes"))
            return None
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._refuse(400, InvalidArgumentError("a call's body is one JSON object"))
            return None
        return body

    def _answer(self, make: Callable[[], Any]) -> None:
        try:
            result = make()
        except TillageError as err:
            self._refuse(http_status(err), err)
            return
        except Exception as exc:  # a bug: answered as internal, never a dropped connection
            self._refuse(500, InternalError(f"internal error: {type(exc).__name__}: {exc}"))
            return
        self._json(200, {"result": result})

    def _refuse(self, status: int, err: TillageError) -> None:
        self._json(status, {"error": err.envelope()})

    def _json(self, status: int, doc: dict[str, Any]) -> None:
        data = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
        self.send_response(status)
        self._headers("application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _file(self, name: str) -> None:
        known = {p.name: p for p in STATIC.iterdir() if p.is_file()}
        path = known.get(name)  # a name the folder holds, never a path built from the URL
        if path is None or path.suffix not in TYPES:
            self._refuse(404, NotOfferedError(f"no file {name[:100]!r}"))
            return
        data = path.read_bytes()
        self.send_response(200)
        self._headers(TYPES[path.suffix])
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _headers(self, content_type: str) -> None:
        self.send_header("Content-Type", content_type)
        for name, value in guard.SECURITY_HEADERS:
            self.send_header(name, value)

    def _method_not_allowed(self) -> None:
        from tillage.errors import InvalidArgumentError

        if not self._allowed("GET", "/"):  # the host is checked; no method here needs more
            return
        data = json.dumps(
            {"error": InvalidArgumentError(f"{self.command} is not served").envelope()}
        ).encode()
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self._headers("application/json; charset=utf-8")
        self.send_header("Allow", "GET, POST")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _parts(body: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    from tillage.errors import InvalidArgumentError

    verb, universe, params = body.get("verb"), body.get("universe"), body.get("params", {})
    if not isinstance(verb, str) or not isinstance(universe, str):
        raise InvalidArgumentError("a call names its `verb` and its `universe`")
    if not isinstance(params, dict):
        raise InvalidArgumentError("a call's `params` is an object")
    return verb, universe, params


def _follow(door: Door, folder: Path, after: str | None) -> Any:
    """The family's event stream, followed (the events verb, as `till events --follow
    --family` runs it)."""
    import dataclasses

    from tillage.verbs.contract import decode_request
    from tillage.verbs.invoke import invoke
    from tillage.verbs.registry import by_name

    verb = by_name("workspace.events")
    request = decode_request(verb.contract, {"after": after, "follow": True, "family": True})
    return invoke(verb, dataclasses.replace(door.settings, folder=folder), request)


def _warm(server: MissionControl) -> None:
    import contextlib

    from tillage.store.store import close_stores_opened_by

    with server.working():
        with contextlib.suppress(Exception):  # a failure here is answered to the page's call
            server.door.universes()
        close_stores_opened_by(threading.get_ident())


def new_token() -> str:
    """A random token for one run (256 bits)."""
    import secrets

    return secrets.token_urlsafe(32)


def serve(settings: Settings, result: Any, *, out: IO[str], json_mode: bool) -> int:
    """Serves Mission Control until SIGINT, SIGTERM or SIGHUP: prints its URL (one JSON line
    under --json) once it listens, and opens it in a browser when asked."""
    server = MissionControl(settings, int(result.port), new_token())

    def stop(_signum: int, _frame: Any) -> None:
        server.stopping.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    # Before the URL is printed: a signal sent as soon as it is read stops the server too.
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    if json_mode:
        doc = {
            "url": server.url,
            "port": server.port,
            "token": server.token,
            "workspace": result.workspace,
        }
        out.write(json.dumps(doc, separators=(",", ":")) + "\n")
    else:
        out.write(
            f"Mission Control for {result.workspace}\n  {server.url}\n"
            "(the link carries this run's token; Ctrl-C stops it)\n"
        )
    out.flush()
    # The first call imports the verbs (a third of a second): done now, while the person
    # is still reaching for the link, so the first paint costs what every later one does.
    threading.Thread(target=_warm, args=(server,), daemon=True).start()
    if result.open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stopping.set()  # live feeds end at their next poll
        server.server_close()
    if not server.wait_idle(SHUTDOWN_WAIT_S):
        # A call still runs (a merge's check): the engine finishes or rolls back what a
        # process stopped mid-change leaves, so it is stopped as a kill would stop it.
        out.flush()
        os._exit(0)
    return 0
