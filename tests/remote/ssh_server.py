"""A real sshd on 127.0.0.1 for the SSH remote's tests, with throwaway keys (LIBRARIES.md §11,
../shared/design/start_sshd.example.sh): nothing in /etc/ssh or ~/.ssh is read or touched.

`ssh_server` (one per session) runs `/usr/sbin/sshd -D` as our own child, so it is stopped by
its PID; where sshd is missing or cannot start, every test that needs it is skipped with the
reason. `ssh_remote` is a fresh SshRemote per test (a new folder on the "far side", which the
helper creates), and `ssh_remote_env` is what reopens its URL: TILLAGE_SSH with the throwaway
client key and known_hosts, TILLAGE_REMOTE_TILL with this venv's `till` by absolute path (sshd
runs commands with a minimal PATH) and a TILLAGE_HOME of the test run's own.
"""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import tillage
from tests.helpers import free_port
from tillage.platform.names import random_hex
from tillage.remote.base import Remote

# What conftest.py star-imports: the fixtures.
__all__ = ["ssh_remote", "ssh_remote_env", "ssh_server"]

SSHD = "/usr/sbin/sshd"
START_TIMEOUT = 10.0


@dataclass(frozen=True)
class SshServer:
    """A running throwaway sshd and the client settings that reach it."""

    port: int
    user: str
    folder: Path  # keys, known_hosts, the server's log
    ssh: str  # the client command (TILLAGE_SSH), without the port
    till: str  # tillage on the far side (TILLAGE_REMOTE_TILL)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment an SshRemote needs to reach this server."""
        return {"TILLAGE_SSH": self.ssh, "TILLAGE_REMOTE_TILL": self.till, **extra}

    def url(self, path: Path | str) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}{path}"

    def log(self) -> str:
        try:
            return (self.folder / "sshd.log").read_text(errors="replace")
        except OSError:
            return ""


def this_till() -> str:
    """This venv's `till`, by absolute path."""
    candidate = Path(sys.executable).parent / "till"
    found = str(candidate) if candidate.exists() else shutil.which("till")
    if not found:
        pytest.skip("this environment has no `till` script to run on the far side")
    return str(Path(found).absolute())


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            return bool(s.recv(4).startswith(b"SSH-"))
    except OSError:
        return False


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )


def _start(folder: Path, port: int, user: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            SSHD,
            "-D",
            "-f",
            "/dev/null",
            "-E",
            str(folder / "sshd.log"),
            "-p",
            str(port),
            "-o",
            "ListenAddress=127.0.0.1",
            "-o",
            f"HostKey={folder / 'host_key'}",
            "-o",
            f"PidFile={folder / 'sshd.pid'}",
            "-o",
            f"AuthorizedKeysFile={folder / 'authorized_keys'}",
            "-o",
            "StrictModes=no",
            "-o",
            "UsePAM=no",
            "-o",
            "PasswordAuthentication=no",
            "-o",
            "KbdInteractiveAuthentication=no",
            "-o",
            "PermitRootLogin=prohibit-password",
            "-o",
            f"AllowUsers={user}",
            "-o",
            "MaxStartups=100",
            "-o",
            "MaxSessions=100",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """One sshd for the whole run, on a free port of 127.0.0.1."""
    if not os.access(SSHD, os.X_OK):
        pytest.skip(f"{SSHD} is missing: install openssh-server to run the SSH remote tests")
    ssh = shutil.which("ssh")
    if ssh is None or shutil.which("ssh-keygen") is None:
        pytest.skip("the OpenSSH client (ssh, ssh-keygen) is missing")
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        try:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # Debian's privsep folder
        except OSError as exc:
            pytest.skip(f"sshd needs /run/sshd and it cannot be made: {exc}")
    folder = tmp_path_factory.mktemp("sshd")
    folder.chmod(0o700)
    user = getpass.getuser()
    _keygen(folder / "host_key")
    _keygen(folder / "client_key")
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    host_key = " ".join((folder / "host_key.pub").read_text().split()[:2])
    proc: subprocess.Popen[bytes] | None = None
    port = 0
    why = ""
    for _attempt in range(5):  # a free port can be taken between the probe and the bind
        port = free_port()
        proc = _start(folder, port, user)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and proc.poll() is None and not _accepts(port):
            time.sleep(0.05)
        if proc.poll() is None and _accepts(port):
            break
        _stop(proc)
        log = (
            (folder / "sshd.log").read_text(errors="replace")
            if (folder / "sshd.log").exists()
            else ""
        )
        why = (log.strip().splitlines() or ["(no log)"])[-1]
        proc = None
    if proc is None:
        pytest.skip(f"sshd did not start on 127.0.0.1: {why}")
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key}\n")
    q = shlex.quote
    client = (
        f"{q(ssh)} -F /dev/null -i {q(str(folder / 'client_key'))} -o IdentitiesOnly=yes "
        f"-o BatchMode=yes -o UserKnownHostsFile={q(str(folder / 'known_hosts'))} "
        "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o ConnectTimeout=10"
    )
    far_home = folder / "far-home"
    far_home.mkdir()
    # The far side runs the tillage under test: the source tree this run imports, not
    # whatever the venv's script would find on its own (sshd passes no PYTHONPATH).
    source = str(Path(tillage.__file__).resolve().parent.parent)
    till = f"/usr/bin/env TILLAGE_HOME={q(str(far_home))} PYTHONPATH={q(source)} {q(this_till())}"
    try:
        yield SshServer(port=port, user=user, folder=folder, ssh=client, till=till)
    finally:
        _stop(proc)


@pytest.fixture
def ssh_remote_env(ssh_server: SshServer) -> Mapping[str, str]:
    return ssh_server.env()


@pytest.fixture
def ssh_remote(ssh_server: SshServer, tmp_path: Path) -> Iterator[Remote]:
    """A fresh SshRemote on a folder of its own (made by the far side at the handshake)."""
    from tillage.remote.ssh import SshRemote

    path = tmp_path / f"ssh-remote-{random_hex(4)}"
    remote = SshRemote.from_url(ssh_server.url(path), ssh_server.env())
    yield remote
    remote.close()
