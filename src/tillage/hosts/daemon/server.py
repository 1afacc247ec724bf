"""The daemon's JSON-RPC 2.0 server on a Unix socket: one object per line each way.

Methods (docs/design/socket.md): `tillage.ping`, `tillage.changes_since`, `tillage.cli` (the
command line run in the daemon) and every registry verb by contract name, answered with the
result document exactly as `--json` prints it; errors carry the public code and
`data: {name, next, details}`. A thread per connection; every call opens its own store.

A `tillage.cli` call with `handshake: true` (an agent's hook, which gives up on a slow watcher
and seals in its own process) is run only once its caller still wants it: the server says
`tillage.starting`, and runs the command on the caller's `tillage.go`; a caller that hung up
instead (or says nothing for HANDSHAKE_TIMEOUT) gets nothing run, so a hook is sealed once,
by whichever side the caller chose, and never late by a watcher that was stopped meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from tillage.errors import InternalError, TillageError
from tillage.watch.service import WatchService

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    # Asks the caller of request `rid` whether it still wants it run (the handshake).
    Confirm = Callable[[Any], bool]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
MAX_LINE = 64 * 1024 * 1024  # a request larger than this is refused, not buffered forever
HANDSHAKE_TIMEOUT = 5.0  # seconds a `tillage.starting` waits for the caller's `tillage.go`


class _AbandonedError(Exception):
    """The caller of a handshake call hung up (or said something else): nothing was run."""


class _RpcFailureError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Server:
    """Serves one watcher's socket until closed."""

    def __init__(
        self,
        listener: socket.socket,
        path: Path,
        service: WatchService,
        *,
        user_home: Path | None,
        debug_methods: bool = False,
    ) -> None:
        self.listener = listener
        self.path = path
        self.service = service
        self.user_home = user_home
        self.debug_methods = debug_methods
        self._wake_r, self._wake_w = os.pipe()
        self._closing = False
        self._active = 0
        self._active_cond = threading.Condition()
        self._thread = threading.Thread(target=self._accept_loop, name="tillage-rpc", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self, *, wait: float = 60.0, remove_socket: bool = True) -> None:
        """Stops accepting, removes the socket (unless told it is not ours any more), and
        waits (bounded) for calls in flight."""
        self._closing = True
        if remove_socket:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        self.listener.close()
        with self._active_cond:
            self._active_cond.wait_for(lambda: self._active == 0, timeout=wait)

    def _accept_loop(self) -> None:
        poller = select.poll()
        poller.register(self.listener.fileno(), select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while not self._closing:
            try:
                ready = poller.poll()
            except InterruptedError:
                continue
            if self._closing:
                return
            if not any(fd == self.listener.fileno() for fd, _ in ready):
                continue
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            threading.Thread(
                target=self._serve, args=(conn,), name="tillage-rpc-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            while True:
                line = reader.readline(MAX_LINE + 1)
                if not line:
                    return
                if not line.strip():
                    continue
                with self._active_cond:
                    if self._closing:
                        return
                    self._active += 1
                try:
                    answer = self._answer(line, lambda rid: _confirm(conn, reader, rid))
                except _AbandonedError:
                    return
                finally:
                    with self._active_cond:
                        self._active -= 1
                        self._active_cond.notify_all()
                if answer is None:
                    continue
                try:
                    conn.sendall(_encode(answer))
                except OSError:
                    return

    def _answer(self, line: bytes, confirm: Confirm | None = None) -> dict[str, Any] | None:
        try:
            request = json.loads(line)
        except ValueError:
            return _error(None, PARSE_ERROR, "parse error: the line is not JSON")
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            return _error(None, INVALID_REQUEST, "invalid request: no method")
        rid = request.get("id")
        params = request.get("params", {})
        if params is None:
            params = {}
        try:
            if not isinstance(params, dict):
                raise _RpcFailureError(INVALID_PARAMS, "params must be an object")
            result = self.dispatch(request["method"], params, rid=rid, confirm=confirm)
        except _RpcFailureError as exc:
            return _error(rid, exc.code, exc.message)
        except TillageError as exc:
            return _public_error(rid, exc)
        except _AbandonedError:
            raise
        except Exception as exc:
            return _public_error(rid, InternalError(f"internal error: {type(exc).__name__}: {exc}"))
        if "id" not in request:
            return None  # a notification
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def dispatch(
        self,
        method: str,
        params: dict[str, Any],
        *,
        rid: Any = None,
        confirm: Confirm | None = None,
    ) -> Any:
        """Runs one method and returns its JSON-ready result (`confirm`: how to ask the
        caller of a handshake call whether to run it)."""
        if method == "tillage.cli":
            return _cli(self, params, rid, confirm)
        handler = _BUILTIN.get(method)
        if handler is not None:
            return handler(self, params)
        if method.startswith("tillage.debug.") and self.debug_methods:
            return _debug(self, method, params)
        return self._verb(method, params)

    def _verb(self, method: str, params: dict[str, Any]) -> Any:
        from tillage.verbs.contract import decode_request
        from tillage.verbs.invoke import Settings, invoke
        from tillage.verbs.registry import by_name
        from tillage.verbs.wire import to_wire

        try:
            verb = by_name(method)
        except KeyError:
            raise _RpcFailureError(METHOD_NOT_FOUND, f"method not found: {method}") from None
        request = decode_request(verb.contract, params)
        settings = Settings(
            home=self.service.home, folder=self.service.root, user_home=self.user_home
        )
        try:
            return to_wire(invoke(verb, settings, request))
        finally:
            from tillage.store.store import close_stores_opened_by

            close_stores_opened_by(threading.get_ident())  # the answer is whole: done with them


def _ping(server: Server, _params: dict[str, Any]) -> Any:
    from tillage.platform.identity import code_identity

    return {**server.service.describe(), "code": code_identity()}


def _changes_since(server: Server, params: dict[str, Any]) -> Any:
    token = params.get("token")
    if token is not None and not isinstance(token, str):
        raise _RpcFailureError(INVALID_PARAMS, "token must be a string or null")
    changes = server.service.since(token)
    dirs = None if changes.dirs is None else sorted(changes.dirs)
    names = {d: sorted(n) for d, n in sorted(changes.names.items())}
    return {"token": changes.token, "dirs": dirs, "names": names}


def _confirm(conn: socket.socket, reader: Any, rid: Any) -> bool:
    """Tells the caller request `rid` is about to run and waits (HANDSHAKE_TIMEOUT at most)
    for its `tillage.go`; False when it hung up, said something else or nothing."""
    notice = {"jsonrpc": "2.0", "method": "tillage.starting", "params": {"id": rid}}
    try:
        conn.sendall(_encode(notice))
        conn.settimeout(HANDSHAKE_TIMEOUT)
        try:
            line = reader.readline(MAX_LINE + 1)
        finally:
            conn.settimeout(None)
        doc = json.loads(line) if line.strip() else None
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict) or doc.get("method") != "tillage.go":
        return False
    go = doc.get("params")
    return isinstance(go, dict) and go.get("id") == rid


def _cli(_server: Server, params: dict[str, Any], rid: Any, confirm: Confirm | None) -> Any:
    import base64
    import importlib

    argv = params.get("argv")
    cwd = params.get("cwd")
    env = params.get("env") or {}
    stdin_b64 = params.get("stdin_b64")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise _RpcFailureError(INVALID_PARAMS, "argv must be a list of strings")
    if not isinstance(cwd, str) or not isinstance(env, dict):
        raise _RpcFailureError(INVALID_PARAMS, "cwd must be a string and env an object")
    stdin = base64.b64decode(stdin_b64) if isinstance(stdin_b64, str) else None
    # Before anything slow (the first call imports the command line): the caller is waiting
    # for this notice, briefly.
    if params.get("handshake") is True and (confirm is None or not confirm(rid)):
        raise _AbandonedError
    # The command line's own entry point (hosts.cli.main.run_served), imported when first
    # asked for: a daemon serving only seals never loads the CLI.
    run_served = getattr(importlib.import_module("tillage.hosts.cli.main"), "run_served", None)
    if run_served is None:
        raise _RpcFailureError(METHOD_NOT_FOUND, "method not found: tillage.cli")
    code, out, err = run_served(argv, cwd, {str(k): str(v) for k, v in env.items()}, stdin)
    return {
        "exit": code,
        "stdout_b64": base64.b64encode(out).decode(),
        "stderr_b64": base64.b64encode(err).decode(),
    }


def _debug(server: Server, method: str, params: dict[str, Any]) -> Any:
    """Test-only methods, served only when the daemon started with TILLAGE_WATCH_DEBUG=1."""
    if method == "tillage.debug.drop_events":
        server.service.simulate_overflow(bool(params.get("dropping")))
        return {"dropping": bool(params.get("dropping"))}
    raise _RpcFailureError(METHOD_NOT_FOUND, f"method not found: {method}")


_BUILTIN: dict[str, Callable[[Server, dict[str, Any]], Any]] = {
    "tillage.ping": _ping,
    "tillage.changes_since": _changes_since,
}


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _public_error(rid: Any, err: TillageError) -> dict[str, Any]:
    data = {"name": err.name, "next": err.next, "details": err.details}
    body = {"code": err.code, "message": err.message, "data": data}
    return {"jsonrpc": "2.0", "id": rid, "error": body}


def _encode(doc: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a name that is not UTF-8, kept as lone surrogates
        return json.dumps(doc, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"
