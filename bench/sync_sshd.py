"""The sync bench's throwaway sshd: our own `sshd -D` on 127.0.0.1 with throwaway host and
client keys (nothing in /etc/ssh or ~/.ssh is read), as tests/remote/ssh_server.py starts one,
with the sftp subsystem on (restic's sftp backend), and the client commands that reach it for
tillage (TILLAGE_SSH), rsync (-e) and restic (-o sftp.command=...).
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
from dataclasses import dataclass
from pathlib import Path

from measure import ToolMissingError

SSHD = "/usr/sbin/sshd"
START_TIMEOUT_S = 10.0


@dataclass
class Sshd:
    """Our own `sshd -D` on 127.0.0.1 with throwaway keys, and the client that reaches it."""

    proc: subprocess.Popen[bytes]
    port: int
    user: str
    folder: Path
    client: list[str]  # ssh and its options, without the port or a log
    far_till: str  # TILLAGE_REMOTE_TILL

    def ssh_words(self, log: Path) -> list[str]:
        """The client with a per-step log of its sessions (their bytes on the wire)."""
        return [*self.client, "-o", "LogLevel=VERBOSE", "-E", str(log)]

    def tillage_env(self, log: Path) -> dict[str, str]:
        return {
            "TILLAGE_SSH": shlex.join(self.ssh_words(log)),
            "TILLAGE_REMOTE_TILL": self.far_till,
        }

    def rsync_e(self, log: Path) -> str:
        return shlex.join([*self.ssh_words(log), "-p", str(self.port)])

    def url(self, path: Path) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}{path}"

    def rsync_spec(self, path: Path) -> str:
        return f"{self.user}@127.0.0.1:{path}/"

    def restic_repo(self, path: Path) -> str:
        """restic's sftp repository URL (the command below says how to reach it)."""
        return f"sftp:{self.user}@127.0.0.1:{path}"

    def sftp_command(self, log: Path) -> str:
        """restic's `-o sftp.command=...`: the same client, its keys and a per-step log."""
        words = [*self.ssh_words(log), "-p", str(self.port), f"{self.user}@127.0.0.1"]
        return shlex.join([*words, "-s", "sftp"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def this_till() -> str:
    """The `till` script beside this interpreter, by absolute path (sshd's PATH is minimal)."""
    candidate = Path(sys.executable).parent / "till"
    found = str(candidate) if candidate.exists() else shutil.which("till")
    if not found:
        raise ToolMissingError("no `till` script beside this python to run on the far side")
    return str(Path(found).absolute())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            return bool(s.recv(4).startswith(b"SSH-"))
    except OSError:
        return False


def start_sshd(folder: Path, far_till: str) -> Sshd:
    """Starts sshd -D on a free port of 127.0.0.1 (our child, stopped by its PID)."""
    if not os.access(SSHD, os.X_OK):
        raise ToolMissingError(f"{SSHD} is missing (apt-get install openssh-server)")
    ssh = shutil.which("ssh")
    if ssh is None or shutil.which("ssh-keygen") is None:
        raise ToolMissingError("the OpenSSH client (ssh, ssh-keygen) is missing")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # Debian's privilege separation
    folder.mkdir(mode=0o700, parents=True)
    for key in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    user = getpass.getuser()
    why = ""
    for _attempt in range(5):  # a free port can be taken between the probe and the bind
        port = _free_port()
        proc = subprocess.Popen(
            [
                SSHD,
                "-D",
                "-f",
                "/dev/null",
                "-E",
                str(folder / "sshd.log"),
                "-p",
                str(port),
                *("-o", "ListenAddress=127.0.0.1"),
                *("-o", f"HostKey={folder / 'host_key'}"),
                *("-o", f"PidFile={folder / 'sshd.pid'}"),
                *("-o", f"AuthorizedKeysFile={folder / 'authorized_keys'}"),
                *("-o", "StrictModes=no", "-o", "UsePAM=no"),
                *("-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no"),
                *("-o", "PermitRootLogin=prohibit-password", "-o", f"AllowUsers={user}"),
                *("-o", "MaxStartups=100", "-o", "MaxSessions=100"),
                *("-o", "Subsystem=sftp internal-sftp"),  # restic's sftp backend
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and proc.poll() is None and not _accepts(port):
            time.sleep(0.05)
        if proc.poll() is None and _accepts(port):
            host_key = " ".join((folder / "host_key.pub").read_text().split()[:2])
            (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key}\n")
            client = [
                ssh,
                *("-F", "/dev/null", "-i", str(folder / "client_key")),
                *("-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"),
                *("-o", f"UserKnownHostsFile={folder / 'known_hosts'}"),
                *("-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes"),
                *("-o", "ConnectTimeout=10"),
            ]
            far_home = folder / "far-home"
            far_home.mkdir()
            till = shlex.join(["/usr/bin/env", f"TILLAGE_HOME={far_home}", *shlex.split(far_till)])
            return Sshd(proc, port, user, folder, client, till)
        Sshd(proc, port, user, folder, [], "").stop()
        log = folder / "sshd.log"
        lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
        why = (lines or ["(no log)"])[-1]
    raise ToolMissingError(f"sshd did not start on 127.0.0.1: {why}")
