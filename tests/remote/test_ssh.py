"""The SSH remote against a real sshd on 127.0.0.1: faults (a helper killed mid-operation, a
silent far side, a refused connection, another protocol version, junk on stdout, no tillage
there), the frame limit, two helpers racing one ref, and what it costs (latency, throughput).

Every failure must arrive as a public error within a bounded time: the tests time it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port
from tests.remote.ssh_server import SshServer
from tillage.remote.errors import (
    BadRemoteUrlError,
    RemoteProtocolError,
    RemoteUnavailableError,
)
from tillage.remote.ssh import SshRemote, ssh_command
from tillage.remote.url import open_remote
from tillage.remote.wire import MAX_PAYLOAD

pytestmark = pytest.mark.process  # real `till` processes, daemons or servers

MiB = 1024 * 1024
BOUND = 15.0  # no failure below may take longer than this to be reported


def _open(server: SshServer, path: Path, **kwargs: float | str) -> SshRemote:
    url = server.url(path)
    env = server.env(**{k: str(v) for k, v in kwargs.items() if isinstance(v, str)})
    timeouts = {k: v for k, v in kwargs.items() if isinstance(v, float)}
    return SshRemote(url, ssh_command(url, env), env=env, **timeouts)  # type: ignore[arg-type]


def _far_side(tmp_path: Path, server: SshServer, body: str) -> str:
    """A far side that runs `body` (shell) before it becomes tillage: TILLAGE_REMOTE_TILL."""
    script = tmp_path / f"far-{time.monotonic_ns()}.sh"
    script.write_text(f'#!/bin/sh\n{body}\nexec {server.till} "$@"\n')
    script.chmod(0o755)
    return str(script)


def _fake_far_side(tmp_path: Path, reply: str) -> str:
    """A far side that is not this tillage: it answers the handshake with `reply` (Python)."""
    script = tmp_path / f"fake-{time.monotonic_ns()}.py"
    script.write_text(
        "from tillage.remote.wire import Channel\n"
        "channel = Channel(0, 1)\n"
        "channel.receive(timeout=30)\n"
        f"channel.send({reply}, timeout=30)\n"
        "try:\n"
        "    channel.receive(timeout=30)\n"
        "except Exception:\n"
        "    pass\n"
    )
    return f"{sys.executable} {script}"


@pytest.fixture
def far_pid(tmp_path: Path) -> Iterator[Path]:
    """Where a wrapped far side writes its process ID; a process still stopped at the end is
    continued, so nothing outlives the test."""
    path = tmp_path / "far.pid"
    yield path
    if path.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(path.read_text()), signal.SIGCONT)


def _pump(
    remote: SshRemote, data: bytes, outcome: dict[str, object], started: threading.Event
) -> None:
    """Puts objects until one fails; records the error and when it came."""
    try:
        for i in range(10_000):
            remote.put(f"objects/{i:05d}", data)
            started.set()
    except Exception as exc:
        outcome["error"] = exc
        outcome["at"] = time.monotonic()


def test_a_killed_ssh_helper_is_unavailable_within_bounds_and_the_next_call_reconnects(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    remote = _open(ssh_server, tmp_path / "r")
    try:
        outcome: dict[str, object] = {}
        started = threading.Event()
        pump = threading.Thread(target=_pump, args=(remote, os.urandom(8 * MiB), outcome, started))
        pump.start()
        assert started.wait(BOUND)
        pid = remote.helper_pid
        assert pid is not None
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        pump.join(BOUND)
        assert not pump.is_alive()
        error = outcome["error"]
        assert isinstance(error, RemoteUnavailableError), error
        assert remote.url in error.message and "ssh helper ended" in error.message
        assert float(outcome["at"]) - killed < BOUND  # type: ignore[arg-type]
        # The next call starts a new helper; what was put before the kill is there.
        assert remote.exists(["objects/00000"]) == {"objects/00000"}
        assert remote.helper_pid not in (None, pid)
    finally:
        remote.close()


def test_a_far_side_killed_mid_transfer_is_unavailable_with_the_reason(
    ssh_server: SshServer, tmp_path: Path, far_pid: Path
) -> None:
    till = _far_side(tmp_path, ssh_server, f"echo $$ > {far_pid}")
    remote = _open(ssh_server, tmp_path / "r", TILLAGE_REMOTE_TILL=till)
    try:
        outcome: dict[str, object] = {}
        started = threading.Event()
        pump = threading.Thread(target=_pump, args=(remote, os.urandom(8 * MiB), outcome, started))
        pump.start()
        assert started.wait(BOUND)
        killed = time.monotonic()
        os.kill(int(far_pid.read_text()), signal.SIGKILL)
        pump.join(BOUND)
        assert not pump.is_alive()
        error = outcome["error"]
        assert isinstance(error, RemoteUnavailableError), error
        assert float(outcome["at"]) - killed < BOUND  # type: ignore[arg-type]
        assert remote.get("objects/00000")  # reconnected
    finally:
        remote.close()


def test_a_silent_far_side_is_unavailable_after_the_idle_timeout_not_a_hang(
    ssh_server: SshServer, tmp_path: Path, far_pid: Path
) -> None:
    till = _far_side(tmp_path, ssh_server, f"echo $$ > {far_pid}")
    remote = _open(ssh_server, tmp_path / "r", TILLAGE_REMOTE_TILL=till, timeout=1.5)
    try:
        remote.put("config", b"c")
        os.kill(int(far_pid.read_text()), signal.SIGSTOP)  # alive, connected, says nothing
        began = time.monotonic()
        with pytest.raises(RemoteUnavailableError) as caught:
            remote.exists(["config"])
        took = time.monotonic() - began
        assert 1.4 < took < 1.5 + BOUND
        assert "sent nothing for 1.5 s" in caught.value.message
        os.kill(int(far_pid.read_text()), signal.SIGCONT)
        assert remote.exists(["config"]) == {"config"}  # a new helper
    finally:
        remote.close()


def test_a_refused_connection_is_unavailable_with_ssh_s_reason(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    url = f"ssh://{ssh_server.user}@127.0.0.1:{free_port()}{tmp_path / 'r'}"
    began = time.monotonic()
    with pytest.raises(RemoteUnavailableError) as caught:
        open_remote(url, ssh_server.env(), str(tmp_path))
    assert time.monotonic() - began < BOUND
    error = caught.value
    assert "Connection refused" in error.message
    assert error.message.startswith(url)
    assert "ssh" in error.next and "TILLAGE_SSH" in error.next
    assert error.code == -32290 and error.name == "sync.remote_unavailable"


def test_a_missing_ssh_command_is_unavailable(tmp_path: Path) -> None:
    env = {"TILLAGE_SSH": str(tmp_path / "no-such-ssh")}
    with pytest.raises(RemoteUnavailableError) as caught:
        SshRemote.from_url("ssh://host.invalid/srv/r", env)
    assert "cannot start" in caught.value.message
    assert "TILLAGE_SSH" in caught.value.next


def test_a_far_side_without_tillage_says_so_and_how_to_name_it(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    with pytest.raises(RemoteUnavailableError) as caught:
        _open(ssh_server, tmp_path / "r", TILLAGE_REMOTE_TILL=str(tmp_path / "no-till"))
    error = caught.value
    assert "exit status 127" in error.message and "no-till" in error.message
    assert "TILLAGE_REMOTE_TILL" in error.next


@pytest.mark.parametrize(
    "reply",
    [
        '{"ok": True, "version": 3}',
        '{"error": {"kind": "version", "message": "speaks 3", "version": 3}}',
    ],
    ids=["answers-with-version-3", "refuses-version-2"],
)
def test_a_far_side_speaking_another_protocol_version_is_a_protocol_error(
    ssh_server: SshServer, tmp_path: Path, reply: str
) -> None:
    till = _fake_far_side(tmp_path, reply)
    began = time.monotonic()
    with pytest.raises(RemoteProtocolError) as caught:
        _open(ssh_server, tmp_path / "r", TILLAGE_REMOTE_TILL=till)
    assert time.monotonic() - began < BOUND
    assert "version 3" in caught.value.message and "speaks 2" in caught.value.message
    assert caught.value.name == "sync.remote_protocol"


def test_a_far_side_that_prints_junk_on_stdout_is_a_protocol_error_not_a_hang(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    till = _far_side(tmp_path, ssh_server, "echo 'Welcome to the far side!'")
    began = time.monotonic()
    with pytest.raises(RemoteProtocolError) as caught:
        _open(ssh_server, tmp_path / "r", TILLAGE_REMOTE_TILL=till)
    assert time.monotonic() - began < BOUND
    assert "Welcome to the far" in caught.value.message
    assert "prints nothing on stdout" in caught.value.next


def test_a_64_mib_object_round_trips_and_one_byte_more_is_refused_before_sending(
    ssh_remote: SshRemote,
) -> None:
    data = os.urandom(MAX_PAYLOAD)
    ssh_remote.put("objects/big", data)
    assert ssh_remote.get("objects/big") == data
    versioned = ssh_remote.read_versioned("objects/big")
    assert versioned is not None and versioned.data == data
    with pytest.raises(RemoteProtocolError) as caught:
        ssh_remote.put("objects/bigger", data + b"x")
    assert "over the 67108864 bytes" in caught.value.message
    assert ssh_remote.exists(["objects/big", "objects/bigger"]) == {"objects/big"}


def _race(
    barrier: threading.Barrier, won: list[bool], i: int, remote: SshRemote, token: str, data: str
) -> None:
    barrier.wait()
    won[i] = remote.write_if("refs/main", data.encode(), token)


def test_two_helpers_racing_write_if_on_one_ref_never_both_win(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    """Two machines' helpers on one far-side folder: the far side's flock serialises them."""
    path = tmp_path / "shared"
    first, second = _open(ssh_server, path), _open(ssh_server, path)
    try:
        assert first.write_if("refs/main", b"0", None)
        for round_ in range(15):
            current = first.read_versioned("refs/main")
            assert current is not None
            barrier = threading.Barrier(2)
            won: list[bool] = [False, False]
            racers = [
                threading.Thread(
                    target=_race, args=(barrier, won, i, r, current.token, f"{round_}-{i}")
                )
                for i, r in enumerate((first, second))
            ]
            for t in racers:
                t.start()
            for t in racers:
                t.join(BOUND)
            assert won.count(True) == 1, won
            winner = won.index(True)
            assert second.get("refs/main") == f"{round_}-{winner}".encode()
    finally:
        first.close()
        second.close()


def test_threads_share_one_helper_and_each_sees_its_own_answers(ssh_remote: SshRemote) -> None:
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(30):
                data = f"{t}:{i}".encode() * (1 + i * 100)
                ssh_remote.put(f"objects/t{t}/{i:02d}", data)
                assert ssh_remote.get(f"objects/t{t}/{i:02d}") == data
        except BaseException as exc:
            errors.append(exc)

    pid = ssh_remote.helper_pid
    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(ssh_remote.list("objects/t")) == 180
    assert ssh_remote.helper_pid == pid  # one process for all of it


def test_close_ends_the_helper_and_a_closed_remote_refuses_calls(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    remote = _open(ssh_server, tmp_path / "r")
    helper = remote._helper  # the process itself is what this test watches
    assert helper is not None
    began = time.monotonic()
    remote.close()
    assert time.monotonic() - began < 5
    assert helper.proc.returncode == 0  # ended at end of input, not killed
    remote.close()
    with pytest.raises(RemoteUnavailableError, match="closed"):
        remote.exists(["config"])


def test_a_folder_with_spaces_and_quotes_reaches_the_far_side_intact(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    path = tmp_path / "it's a $HOME `folder`"
    remote = _open(ssh_server, path)
    try:
        remote.put("config", b"here")
    finally:
        remote.close()
    assert (path / "config").read_bytes() == b"here"


def test_a_far_side_folder_that_cannot_be_made_is_unavailable_at_open(
    ssh_server: SshServer, tmp_path: Path
) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(RemoteUnavailableError) as caught:
        _open(ssh_server, tmp_path / "file" / "r")
    assert "cannot open" in caught.value.message


@pytest.mark.parametrize(
    "url",
    [
        "ssh://user:secret@host/srv/r",
        "ssh://user:secret@host:99999/srv/r",
        "ssh://user:secret@[::1/srv/r",
        "ssh://@host/srv/r",
        "ssh://host",
        "ssh://host/",
        "ssh://-oProxyCommand=x/srv/r",
        "ssh://-x@host/srv/r",
        "ssh://host:99999/srv/r",
        "ssh://host/srv/r?x=1",
    ],
)
def test_ssh_urls_it_cannot_use_are_bad_urls(url: str) -> None:
    with pytest.raises(BadRemoteUrlError) as caught:
        SshRemote.from_url(url, {"TILLAGE_SSH": "/bin/false"})
    assert "secret" not in caught.value.message


def test_the_helper_command_quotes_the_far_side_s_words() -> None:
    env = {"TILLAGE_SSH": "ssh -i '/k e y'", "TILLAGE_REMOTE_TILL": "/opt/t ill/till"}
    assert ssh_command("ssh://me@host:2222/srv/a b", env) == [
        "ssh",
        "-i",
        "/k e y",
        "-p",
        "2222",
        "me@host",
        "/opt/t ill/till remote-serve --stdio '/srv/a b'",
    ]
    assert ssh_command("ssh://host/~/sync", {})[-1] == "till remote-serve --stdio '~/sync'"


def test_exists_latency_and_8_mib_throughput_over_loopback(
    ssh_remote: SshRemote, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a benchmark: a sanity bound, and the numbers, printed (`pytest -s`)."""
    ssh_remote.put("config", b"c")
    samples = []
    for _ in range(2000):
        began = time.perf_counter()
        ssh_remote.exists(["config"])
        samples.append(time.perf_counter() - began)
    samples.sort()
    median, p99 = samples[len(samples) // 2], samples[int(len(samples) * 0.99)]
    data = os.urandom(8 * MiB)
    began = time.perf_counter()
    for i in range(8):
        ssh_remote.put(f"objects/{i}", data)
    put_rate = 64 / (time.perf_counter() - began)
    began = time.perf_counter()
    for i in range(8):
        assert ssh_remote.get(f"objects/{i}") == data
    get_rate = 64 / (time.perf_counter() - began)
    with capsys.disabled():
        print(
            f"\nssh exists(1 name): median {median * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us, "
            f"mean {statistics.fmean(samples) * 1e6:.0f} us; 8 MiB put {put_rate:.0f} MiB/s, "
            f"get {get_rate:.0f} MiB/s"
        )
    assert median < 0.05  # a round trip on an open helper, not a connection per call
