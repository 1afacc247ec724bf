"""A harness's document on stdin: read with a deadline and a cap, only for the verbs whose
contract names a `stdin_param`, and a harness-fed verb never exits with the usage status 2.

Through the real `till` where it matters (a pipe a harness leaves open); the mechanism itself
on a contract made for the test, run through `run` with an explicit io.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Till

from tillage.hosts.cli import main as cli
from tillage.hosts.cli.payload import STDIN_CAP, read_payload
from tillage.verbs.contract import Audience, Contract, Effect, Scope, Verb, param
from tillage.verbs.registry import verb_for_command

HAS_HOOK = verb_for_command("hook") is not None
needs_hook = pytest.mark.skipif(not HAS_HOOK, reason="the `hook` verb is not registered yet")


# -- the mechanism, on a contract of its own ---------------------------------------------------


@dataclass(frozen=True)
class EchoRequest:
    count: int = param("a number", default=0)
    payload: str | None = param("the harness's document", default=None)


@dataclass(frozen=True)
class EchoResult:
    payload: str | None
    count: int


def _echo(_ctx: Any, req: EchoRequest) -> EchoResult:
    return EchoResult(payload=req.payload, count=req.count)


def _verb(stdin_param: str | None) -> Verb[Any, Any]:
    return Verb(
        Contract(
            name="test.echo",
            since=1,
            scope=Scope.NONE,
            audience=Audience.INTERNAL,
            effect=Effect.READ,
            request=EchoRequest,
            result=EchoResult,
            cli="echo",
            doc="Echo the request.",
            stdin_param=stdin_param,
        ),
        _echo,
    )


def _run(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: list[str],
    *,
    stdin: Any,
    stdin_param: str | None = "payload",
    stdin_tty: bool = False,
) -> tuple[int, bytes, bytes]:
    verb = _verb(stdin_param)
    monkeypatch.setattr(
        "tillage.verbs.registry.verb_for_command", lambda word: verb if word == "echo" else None
    )
    out, err = io.BytesIO(), io.BytesIO()
    env = {"HOME": str(tmp_path), "TILLAGE_HOME": str(tmp_path / "store")}
    call = cli.IO(
        cwd=str(tmp_path), env=env, stdin=stdin, stdout=out, stderr=err, stdin_tty=stdin_tty
    )
    code = cli.run(argv, call)
    return code, out.getvalue(), err.getvalue()


def test_the_document_on_stdin_becomes_the_named_field(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, out, _ = _run(monkeypatch, tmp_path, ["--json", "echo"], stdin=b'{"a": "\xff"}')
    assert code == 0
    assert json.loads(out) == {"payload": '{"a": "\ufffd"}', "count": 0}  # bad UTF-8 replaced


def test_a_field_given_on_the_command_line_wins_over_stdin(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    argv = ["--json", "echo", "--payload", "given"]
    code, out, _ = _run(monkeypatch, tmp_path, argv, stdin=b"{}")
    assert code == 0 and json.loads(out)["payload"] == "given"


def test_stdin_is_not_read_from_a_terminal_or_for_a_verb_without_stdin_param(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    class Untouchable(io.BytesIO):
        def fileno(self) -> int:
            raise AssertionError("stdin was read")

    _, out, _ = _run(monkeypatch, tmp_path, ["--json", "echo"], stdin=Untouchable(), stdin_tty=True)
    assert json.loads(out)["payload"] is None
    _, out, _ = _run(
        monkeypatch, tmp_path, ["--json", "echo"], stdin=Untouchable(), stdin_param=None
    )
    assert json.loads(out)["payload"] is None


def test_an_empty_stdin_leaves_the_field_unset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _, out, _ = _run(monkeypatch, tmp_path, ["--json", "echo"], stdin=b"")
    assert json.loads(out)["payload"] is None


def test_a_usage_error_of_a_harness_fed_verb_exits_1_not_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, out, err = _run(monkeypatch, tmp_path, ["--json", "echo", "--count", "x"], stdin=b"")
    assert code == 1
    assert json.loads(out)["error"]["name"] == "usage"
    assert b"invalid int value" in err
    code, _, _ = _run(monkeypatch, tmp_path, ["echo", "--bogus"], stdin=b"")
    assert code == 1
    # The same mistake on a verb that is not fed by a harness is the usual status 2.
    code, _, _ = _run(monkeypatch, tmp_path, ["echo", "--bogus"], stdin=b"", stdin_param=None)
    assert code == 2


def test_the_payload_is_capped() -> None:
    assert len(read_payload(b"x" * (STDIN_CAP + 10))) == STDIN_CAP


def test_a_pipe_left_open_and_never_written_ends_the_read_at_the_deadline() -> None:
    read_end, write_end = os.pipe()
    try:
        started = time.monotonic()
        with os.fdopen(os.dup(read_end), "rb", buffering=0) as stream:
            assert read_payload(stream) == ""
        assert time.monotonic() - started < 3.0
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_whole_document_on_a_pipe_left_open_is_read_without_waiting_out_the_deadline() -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b'{"hook_event_name": "Stop"}\n')
        started = time.monotonic()
        with os.fdopen(os.dup(read_end), "rb", buffering=0) as stream:
            assert json.loads(read_payload(stream)) == {"hook_event_name": "Stop"}
        assert time.monotonic() - started < 0.9
    finally:
        os.close(read_end)
        os.close(write_end)


# -- through the real command ------------------------------------------------------------------


def _till_script() -> str:
    script = Path(sys.executable).with_name("till")
    return str(script) if script.exists() else ""


@pytest.mark.process
@needs_hook
@pytest.mark.parametrize("door", ["module", "script"])
def test_a_hook_whose_harness_leaves_stdin_open_still_finishes(
    till: Till, folder: Path, door: str
) -> None:
    (folder / "a.txt").write_text("a")
    till.json("watch", "--no-daemon")
    if door == "script" and not _till_script():
        pytest.skip("the `till` console script is not installed")
    cmd = [sys.executable, "-m", "tillage"] if door == "module" else [_till_script()]
    started = time.monotonic()
    with subprocess.Popen(
        [*cmd, "--json", "hook", "turn-end", "--agent", "a"],
        cwd=folder,
        env=till.env(),
        stdin=subprocess.PIPE,  # kept open, never written: a harness that sends nothing
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        try:
            out, err = _wait_keeping_stdin(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert time.monotonic() - started < 10, "the hook waited on an open stdin"
    assert proc.returncode == 0, (out, err)
    assert json.loads(out)["snapshot"]["trigger"] == "hook"


def _wait_keeping_stdin(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Waits for the process while its stdin stays open (communicate() would close it)."""
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + 20
    while proc.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError("the command did not finish with stdin left open")
        time.sleep(0.02)
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.stdin is not None
    proc.stdin.close()
    return out, err


@needs_hook
def test_a_hook_usage_error_exits_1_never_2(till: Till) -> None:
    for args in (["hook", "--no-such-flag"], ["--json", "hook", "turn-end", "--bogus"]):
        run = till(*args)
        assert run.code == 1, (args, run.code, run.stderr)
    run = till("--json", "hook", "--no-such-flag")
    assert run.error["name"] == "usage"
