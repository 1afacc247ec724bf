"""Mission Control as a person meets it: `till ui` started as its own process, and an HTTP
client that can say any Host, Origin or header a hostile page could make a browser send."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till

pytestmark = pytest.mark.process


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def doc(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> str:
        return str(self.doc["error"]["name"])


@dataclass
class Mission:
    """A running `till ui`: its process, port and token, and requests to it."""

    proc: subprocess.Popen[str]
    port: int
    token: str
    url: str
    folder: Path
    stderr: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Answer:
        """One request, with exactly the headers given (Host included: a client that sends
        another is a rebinding page)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in sent.items():
                conn.putheader(name, value)
            if data is not None:
                conn.putheader("Content-Length", str(len(data)))
            conn.endheaders(data)
            response = conn.getresponse()
            return Answer(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(),
            )
        finally:
            conn.close()

    def page_headers(self) -> dict[str, str]:
        """What the page's own fetch sends."""
        return {
            "Origin": self.origin,
            "X-Tillage-Token": self.token,
            "Content-Type": "application/json",
            "Sec-Fetch-Site": "same-origin",
        }

    def post(self, path: str, body: Any, **extra: str) -> Answer:
        return self.request("POST", path, body, headers={**self.page_headers(), **extra})

    def get(self, path: str) -> Answer:
        return self.request("GET", path, headers={"X-Tillage-Token": self.token})

    def result(self, path: str, body: Any) -> Any:
        answer = self.post(path, body)
        assert answer.status == 200, (answer.status, answer.body[:2000])
        return answer.doc["result"]

    def overview(self) -> Any:
        answer = self.get("/api/overview")
        assert answer.status == 200, answer.body[:2000]
        return answer.doc["result"]

    def universe(self, name: str) -> str:
        found = [u for u in self.overview()["universes"] if u["name"] == name]
        assert found, name
        return str(found[0]["id"])

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.stderr is not None:
                self.stderr.append(self.proc.stderr.read())
                self.proc.stderr.close()
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def start_ui(till: Till, folder: Path, *args: str) -> Mission:
    """`till --json ui` in `folder`, as its own process, once it prints its URL."""
    proc = till.spawn("--json", "ui", *args, cwd=folder)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    running = Mission(proc, 0, "", "", folder)
    if not line:
        code = running.stop()
        raise AssertionError(f"till ui printed nothing: {code} {running.stderr}")
    doc = json.loads(line)
    running.port, running.token, running.url = doc["port"], doc["token"], doc["url"]
    return running


@pytest.fixture
def mission(till: Till, folder: Path) -> Iterator[Mission]:
    """A workspace with a little history and one fork, and `till ui` serving it."""
    (folder / "app.py").write_text("print('v1')\n")
    (folder / "notes.md").write_text("one\ntwo\nthree\n")
    till.json("watch", "--no-daemon")
    (folder / "app.py").write_text("print('v2')\n")
    till.json("snap", "-m", "second")
    till.json("fork", "agent-a")
    running = start_ui(till, folder)
    try:
        yield running
    finally:
        assert running.stop() == 0, running.stderr


def fork_folder(folder: Path, name: str) -> Path:
    return folder.parent / f"{folder.name}.forks" / name


def no_cors(answer: Answer) -> bool:
    return not any(h.startswith("access-control-") for h in answer.headers)
