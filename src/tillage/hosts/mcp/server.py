"""`till mcp`: an MCP server on stdio, its tools derived from the verb registry.

The tool list is asked for, not fixed: a folder that is not attached gets no workspace tools
(a capability that cannot work is absent, not broken). The server watches the attachment while
it runs (a probe a second, about 0.1 ms) and tells the client when the list changes
(`notifications/tools/list_changed`): after `till watch` attaches the folder, and after `till
forget`; a call that races a forget is told what happened.

Calls run on worker threads (up to CONCURRENT_CALLS at once) through verbs/tools.py's
Toolbelt, which keeps a store open per thread, so a call pays no start-up and a long command in
a fork holds up no other call; every failure is a tool result with `isError` and the error's
code, name and next step. A cancelled call (`notifications/cancelled`) stops its command's
whole process group, and its verb seals what the command did, as Ctrl-C does on the command
line. SIGTERM, SIGINT and SIGHUP stop the server at once, even with stdin open, and so does
the end of stdin: running commands are cancelled the same way (their seals made) and every
call answered before it exits.

The protocol is hosts/mcp/protocol.py's, not the SDK's: importing the SDK took longer than the
whole handshake is allowed to (`initialize` within a second), and serving needs none of it.
Nothing heavy is imported before `initialize` is answered: the verb registry waits for the
first `tools/list`.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tillage.hosts.mcp import protocol
from tillage.hosts.mcp.protocol import BadMessageError

if TYPE_CHECKING:
    from tillage.platform.commands import CancelToken
    from tillage.verbs.invoke import Settings
    from tillage.verbs.tools import Toolbelt, ToolResult

SERVER_NAME = "tillage"
# Tool calls served at once (a client may send several; writers meet at the workspace's locks).
CONCURRENT_CALLS = 4
# How often the attachment is probed while the server runs (a change is told within this).
ATTACHMENT_POLL_S = 1.0
# How long a stopping server waits for its cancelled calls to seal and answer: a command gets
# STOP_GRACE after SIGTERM and as long again after SIGKILL (platform/commands.py), then its seal.
SHUTDOWN_WAIT_S = 8.0
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")


def instructions(folder: str) -> str:
    """What the server tells a model about itself, once, at the handshake."""
    return (
        f"tillage keeps restore points of the whole folder {folder} (every file, ignored ones, "
        ".env and databases included). workspace_snapshots lists them; workspace_restore puts "
        "files back (it previews unless confirm is true, and seals the present first so a "
        "restore can be undone); workspace_fork runs a risky command in a copy of the folder; "
        "workspace_merge lands a fork's changes only if a check passes. These move files on "
        "disk and never touch the conversation. When no tools are listed, the folder "
        "is not attached (a person runs `till watch` there); the list is announced again when "
        "that changes."
    )


class _Workers:
    """Daemon threads taking jobs from a queue: a stuck job never keeps the process from
    exiting (a thread pool's threads are joined at exit)."""

    def __init__(self, count: int, name: str) -> None:
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(count)
        ]
        self._started = False
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                for thread in self._threads:
                    thread.start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                job()
            finally:
                self._jobs.task_done()


class Session:
    """One client's conversation with the server: what it is sent (`send`, any thread), the
    calls running (their cancel tokens by request id) and the attachment it was last told."""

    def __init__(
        self,
        settings: Settings,
        send: Callable[[dict[str, Any]], None],
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self._send = send
        self._on_lost = on_lost  # told when the client can no longer be written to
        self._lock = threading.Lock()
        # Requests being served, by id: a call's cancel token (None for a list).
        self._running: dict[str, CancelToken | None] = {}
        self._unanswered: set[str] = set()  # cancelled by the client: never answered
        self._idle = threading.Condition(self._lock)
        self._belt: Toolbelt | None = None
        self._calls = _Workers(CONCURRENT_CALLS, "mcp-call")
        self._lists = _Workers(1, "mcp-list")
        self._offered: bool | None = None  # attachment as the client last saw it (None: not yet)
        self._ever_attached = False
        self._watching = False
        self._stopping: str | None = None
        self._stopped = threading.Event()

    @property
    def belt(self) -> Toolbelt:
        """The toolbelt, made on first use (it imports the verb registry: not before
        `initialize` is answered)."""
        with self._lock:
            if self._belt is None:
                import dataclasses

                from tillage.verbs.tools import Toolbelt

                settings = self.settings
                # Commands keep the host's environment (less the secrets: platform/launch);
                # their output is captured, never copied to stdout, which is the protocol's.
                quiet = (
                    dataclasses.replace(settings.launch, output=None) if settings.launch else None
                )
                self._belt = Toolbelt(
                    dataclasses.replace(settings, own_process=False, launch=quiet)
                )
            return self._belt

    # -- receiving

    def receive(self, line: bytes) -> None:
        """Handles one line from the client."""
        if not line.strip():
            return
        try:
            message = protocol.parse(line)
        except BadMessageError as bad:
            self.send(protocol.error_response(bad.request_id, bad.code, str(bad)))
            return
        method = message.get("method")
        if method is None:
            return  # a response to nothing we asked, or an error about one: nothing to do
        params = message.get("params") or {}
        if "id" not in message:
            self._notified(method, params)
            return
        request_id = message["id"]
        with self._lock:
            stopping = self._stopping
        if stopping is not None and method in ("tools/call", "tools/list"):
            self.send(protocol.error_response(request_id, protocol.SERVER_STOPPING, stopping))
            return
        try:
            self._request(request_id, method, params)
        except BadMessageError as bad:
            self.send(protocol.error_response(request_id, bad.code, str(bad)))

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            key = protocol.request_key(params.get("requestId"))
            reason = params.get("reason")
            said = f": {reason}" if isinstance(reason, str) and reason else ""
            with self._lock:
                token = self._running.get(key)
                if token is not None:
                    self._unanswered.add(key)
            if token is not None:
                token.cancel(f"cancelled by the client{said}")
        elif method == "notifications/initialized":
            self._watch()
        # Any other notification (roots changed, progress) asks nothing of us.

    def _request(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        if method == "initialize":
            from tillage.verbs.system import VERSION

            answer = protocol.initialize_result(
                params.get("protocolVersion"),
                name=SERVER_NAME,
                version=VERSION,
                instructions=instructions(str(self.settings.folder)),
            )
            self.send(protocol.response(request_id, answer))
            self._watch()  # a client may never send `initialized`: watch from here anyway
        elif method == "ping":
            self.send(protocol.response(request_id, {}))
        elif method == "tools/list":
            key = protocol.request_key(request_id)
            with self._lock:
                self._running[key] = None
            self._lists.submit(lambda: self._list(request_id, key))
        elif method == "tools/call":
            name = params.get("name")
            args = params.get("arguments")
            if not isinstance(name, str):
                raise BadMessageError(
                    protocol.INVALID_PARAMS, "Invalid params: name must be a string"
                )
            if args is not None and not isinstance(args, dict):
                raise BadMessageError(
                    protocol.INVALID_PARAMS, "Invalid params: arguments: an object"
                )
            self._start_call(request_id, name, args or {})
        else:
            raise BadMessageError(protocol.METHOD_NOT_FOUND, f"Method not found: {method}")

    # -- tools

    def _list(self, request_id: Any, key: str) -> None:
        try:
            attached = self.belt.attached()
            tools: list[dict[str, Any]] = []
            if attached:
                from tillage.verbs.tool_defs import tool_defs

                tools = [protocol.tool_entry(d) for d in tool_defs()]
            with self._lock:
                self._offered = attached
                self._ever_attached |= attached
            self.send(protocol.response(request_id, {"tools": tools}))
        except Exception as exc:  # answered, never left hanging (and no traceback on the wire)
            self.send(protocol.error_response(request_id, protocol.INTERNAL_ERROR, _internal(exc)))
        finally:
            self._done(key)

    def _done(self, key: str) -> None:
        with self._lock:
            self._running.pop(key, None)
            self._unanswered.discard(key)
            self._idle.notify_all()

    def _start_call(self, request_id: Any, name: str, args: dict[str, Any]) -> None:
        from tillage.platform.commands import CancelToken

        key = protocol.request_key(request_id)
        token = CancelToken()
        with self._lock:
            self._running[key] = token

        def job() -> None:
            try:
                result = self._answer_forgotten(self.belt.call(name, args, cancel=token))
                with self._lock:
                    unanswered = key in self._unanswered
                if not unanswered:  # a cancelled request is not answered (the spec's rule)
                    self.send(protocol.response(request_id, protocol.call_result(result)))
            except Exception as exc:
                self.send(
                    protocol.error_response(request_id, protocol.INTERNAL_ERROR, _internal(exc))
                )
            finally:
                self._done(key)
                token.close()

        self._calls.submit(job)

    def _answer_forgotten(self, result: ToolResult) -> ToolResult:
        """A call that failed because the folder is not attached, in a folder that was attached
        while this server ran, is told so (and the list change announced now, not at the
        next probe)."""
        error = result.document.get("error") if result.is_error else None
        if not isinstance(error, dict) or error.get("name") != "workspace.not_attached":
            return result
        self._probe()
        with self._lock:
            if not self._ever_attached:
                return result
        from tillage.errors import NotAttachedError
        from tillage.verbs.tools import error_result

        folder = self.settings.folder
        err = NotAttachedError(
            f"this folder ({folder}) is no longer attached to tillage: it was attached earlier "
            "in this session and has been forgotten since (`till forget`, or its workspace "
            "removed); its tools are no longer offered",
            next_step=f"a person runs `till watch` in {folder} to attach it again; the tool "
            "list is announced again when they do",
            details={"folder": str(folder), "was_attached": True, "tools_offered": False},
        )
        return error_result(None, err)

    # -- the attachment

    def _watch(self) -> None:
        with self._lock:
            if self._watching:
                return
            self._watching = True
        threading.Thread(target=self._watch_loop, name="mcp-attachment", daemon=True).start()

    def _watch_loop(self) -> None:
        while not self._stopped.wait(ATTACHMENT_POLL_S):
            self._probe()

    def _probe(self) -> None:
        """Looks at the attachment now; tells the client when it is not what it last saw."""
        try:
            attached = self.belt.attached()
        except Exception:  # a store that cannot be read now: judged at the next probe
            return
        with self._lock:
            self._ever_attached |= attached
            changed = self._offered is not None and attached != self._offered
            self._offered = attached
        if changed:
            self.send(protocol.notification(protocol.LIST_CHANGED))

    # -- sending and stopping

    def send(self, message: dict[str, Any]) -> None:
        try:
            self._send(message)
        except OSError:  # the client is gone: nothing more can be told
            self.stop("the client closed the connection")
            if self._on_lost is not None:
                self._on_lost()

    def stop(self, reason: str) -> None:
        """Stops taking calls and cancels the running ones (their commands stopped, their
        seals made); wait() then waits for them."""
        with self._lock:
            if self._stopping is None:
                self._stopping = reason
            tokens = [t for t in self._running.values() if t is not None]
        self._stopped.set()
        for token in tokens:
            token.cancel(reason)

    def wait(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds for the running calls to end; True when they did."""
        import time

        deadline = time.monotonic() + timeout
        with self._idle:
            while self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self) -> None:
        if self._belt is not None:
            self._belt.close()


def _internal(exc: Exception) -> str:
    return f"Internal error ({type(exc).__name__}): a bug in tillage"


class _Output:
    """Writes whole messages to a descriptor, one at a time (calls answer from many
    threads)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def __call__(self, message: dict[str, Any]) -> None:
        data = memoryview(protocol.encode(message))
        with self._lock:
            while data:
                data = data[os.write(self._fd, data) :]


def _read_lines(fd: int, session: Session, done: Callable[[str], None]) -> None:
    """Feeds the client's lines to `session` until stdin closes (then `done`)."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            if pending.strip():
                session.receive(pending)
            done("stdin closed")
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            session.receive(line)


def _take_stdio() -> tuple[int, int]:
    """The protocol's own descriptors for stdin and stdout (not inherited by anything this
    process starts); fd 0 becomes /dev/null and fd 1 stderr, so a child or a stray print can
    neither read the client's messages nor write into the stream."""
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout.flush()
    os.dup2(2, 1)
    return protocol_in, protocol_out


def serve_stdio(settings: Settings) -> int:
    """Serves MCP on this process's stdin/stdout until the client closes stdin or a signal
    (SIGTERM, SIGINT, SIGHUP) stops it. Then the running calls' commands are cancelled (their
    process groups stopped, their seals made), every call is answered, and it exits."""
    if os.isatty(0):
        sys.stderr.write(
            "till mcp speaks MCP (JSON-RPC) on stdin/stdout for an agent harness; it is not "
            "interactive. Register it with your agent, e.g.\n"
            f"  claude mcp add tillage -- till --repo {settings.folder} mcp\n"
            "Serving until stdin closes (Ctrl-D) or Ctrl-C.\n"
        )
    wake = threading.Event()
    stopped_by: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        stopped_by.append(signal.Signals(signum).name)
        wake.set()

    def stdin_closed(_reason: str) -> None:
        wake.set()

    previous = {
        name: signal.signal(getattr(signal, name), on_signal)
        for name in STOP_SIGNALS
        if hasattr(signal, name)
    }
    protocol_in, protocol_out = _take_stdio()
    session = Session(settings, _Output(protocol_out), on_lost=lambda: stdin_closed("lost"))
    reader = threading.Thread(
        target=_read_lines, args=(protocol_in, session, stdin_closed), daemon=True
    )
    reader.start()
    try:
        while not wake.is_set():
            wake.wait(1.0)
    except KeyboardInterrupt:  # a SIGINT that arrived before our handler was in place
        stopped_by.append("SIGINT")
    # Either way the session is over: a command still running is stopped and sealed (a client
    # that closed stdin escalates to SIGTERM, then SIGKILL, within seconds); a call without one
    # finishes and is answered.
    if stopped_by:
        reason = f"the server was stopped ({stopped_by[0]})"
    else:
        reason = "the client closed stdin: the session ended"
    session.stop(reason)
    finished = session.wait(SHUTDOWN_WAIT_S)
    if stopped_by:
        sys.stderr.write(f"till mcp: {reason}\n")
    for name, handler in previous.items():
        signal.signal(getattr(signal, name), handler)
    if not finished:  # a call that would not end: leave it (its workspace recovers)
        sys.stderr.flush()
        os._exit(0)
    session.close()
    return 0
