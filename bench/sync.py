"""Benchmark sync: cold push and clone, the incremental push, and seal-to-visible under --follow.

Issue 12: "On the standard workload: cold push and clone through a directory remote and through
SSH on loopback (against `rsync -a` over the same ssh in the same run), incremental push after
the standard mutate (bytes sent vs new data), and the time from a seal on machine A to the file
on machine B under `--follow`."

Two "machines" are two TILLAGE_HOMEs (two stores) and two folders on this host. The bench
starts its own sshd on 127.0.0.1 (throwaway host and client keys in the scratch dir; nothing in
/etc/ssh or ~/.ssh is read), as tests/remote/ssh_server.py does, and points TILLAGE_SSH at it and
TILLAGE_REMOTE_TILL at this venv's `till`. Each repeat, four lanes go through four phases:

    lane          push (A -> remote)                  clone / pull (remote -> B)
    tillage-dir   till sync --push (a folder remote)  till clone URL B --key K / till sync --pull
    rsync-local   rsync -a A/ FAR/                    rsync -a FAR/ B/
    tillage-ssh   till sync --push (ssh://...)        till clone ssh://... B --key K / sync --pull
    rsync-ssh     rsync -a -e SSH A/ host:FAR/        rsync -a -e SSH host:FAR/ B/

Phases: cold push (the whole folder to an empty remote; tillage's folder was sealed by `till
watch --no-daemon` and the remote added first, both timed apart), cold clone (into an empty
folder), then the standard mutate (bench/workload.py: 100 files edited, 10 added, 10 deleted,
4 MiB appended to the log) in both source folders, the incremental push and the incremental
pull. rsync runs with `-a --delete --exclude=/.tillage` (a mirror; --stats for its byte counts).
In each phase the lanes run in an order rotated by the repeat, each step after a `sync` and
timed until durable (wall time of its processes plus the `sync` after them, as bench/run.py).
Bytes: tillage's own `uploaded_bytes` / `fetched_bytes` (sealed, compressed objects), rsync's
"Total bytes sent/received", and for both over ssh the bytes on the wire as the ssh client
reports them at the end of each session (LogLevel=VERBOSE, -E a log per step). The clones and
the pulls are checked file by file (sha256, exec bit, symlinks) against the source folder.

The new data the mutate made is measured from the folder before and after it: the whole
edited and added files plus the appended log bytes (what a file-level tool must at least read),
the changed lines alone (difflib) plus the added files and the append (the information added),
and zstd -3 of the former, per file.

Follow: after the pulls, on each transport, `till sync --follow --poll-seconds P` runs on A and
on B (B started a random fraction of P after A: two machines poll out of step); after a random
fraction of P, a fresh file is written on A, `till snap` seals it, and B's folder is polled
every 10 ms until the file is there with its content: seal-to-visible is measured from the end
of the snap (and from the write), --follow-samples times per transport and repeat, medians.
The followers' JSON lines are summed up (cycles, pulls, pushes, errors). When this tillage has no
--follow, a loop of `till sync --push` on A then `till sync --pull` on B is measured instead,
and the report says so.

Run ``python bench/sync.py``; see bench/README.md ("Sync").
"""

from __future__ import annotations

import argparse
import difflib
import getpass
import itertools
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

# Sibling modules: `python bench/sync.py` puts bench/ first on sys.path.
import workload
from measure import (
    BenchError,
    Proc,
    ToolMissingError,
    durable_sync,
    machine_facts,
    manifest,
    run_measured,
    tail,
)
from runners import Tillage

MIB = 1024 * 1024
BUSY_LOAD = 0.5  # 1-minute load average above which the machine was not quiet
SSHD = "/usr/sbin/sshd"
EXCLUDED = frozenset({".tillage"})
START_TIMEOUT_S = 10.0
FOLLOW_READY_S = 180.0  # the first --follow cycle on both sides
STOP_TIMEOUT_S = 15.0
VISIBLE_POLL_S = 0.01
LANES = ("tillage-dir", "rsync-local", "tillage-ssh", "rsync-ssh")
PHASES = ("cold_push", "clone", "incr_push", "incr_pull")
TRANSFERRED = re.compile(r"Transferred: sent (\d+), received (\d+) bytes")
RSYNC_SENT = re.compile(r"Total bytes sent: (\d+)")
RSYNC_RECEIVED = re.compile(r"Total bytes received: (\d+)")
RSYNC_FLAGS = ["-a", "--delete", "--exclude=/.tillage", "--stats", "--no-human-readable"]
# What the bench's processes must not inherit from whoever runs it.
SCRUBBED = (
    "PYTHONDONTWRITEBYTECODE",
    "TILLAGE_HOME",
    "TILLAGE_NOW",
    "TILLAGE_RECOVERY_KEY",
    "TILLAGE_SSH",
    "TILLAGE_REMOTE_TILL",
)

Log = Callable[[str], None]


# -- timing -------------------------------------------------------------------------------------


@dataclass
class Step:
    """One timed step: its processes' wall time plus the `sync` after them, their CPU and peak
    RSS, and what the step reported (bytes sent, fetched, on the wire...)."""

    seconds: float
    sync_s: float
    user_s: float
    sys_s: float
    max_rss_kib: int
    facts: dict[str, Any]
    processes: list[dict[str, Any]]


class Runner:
    """Runs and records the processes of the step under way."""

    def __init__(self) -> None:
        self.procs: list[Proc] = []

    def run(self, argv: list[str], cwd: Path, env: dict[str, str]) -> Proc:
        proc = run_measured(argv, cwd=cwd, env=env)
        self.procs.append(proc)
        if proc.returncode != 0:
            raise BenchError(
                f"`{shlex.join(proc.argv)}` exited {proc.returncode}\n"
                f"stdout: {tail(proc.stdout)}\nstderr: {tail(proc.stderr)}"
            )
        return proc


def timed(runner: Runner, action: Callable[[], dict[str, Any]]) -> Step:
    """Runs `action` after a `sync` (no step pays for an earlier one's write-back), timed until
    durable: its processes' wall time plus the `sync` after them."""
    os.sync()
    runner.procs = []
    facts = action()
    sync_s = durable_sync()
    procs = runner.procs
    return Step(
        seconds=sum(p.seconds for p in procs) + sync_s,
        sync_s=sync_s,
        user_s=sum(p.user_s for p in procs),
        sys_s=sum(p.sys_s for p in procs),
        max_rss_kib=max((p.max_rss_kib for p in procs), default=0),
        facts=facts,
        processes=[
            {
                "command": shlex.join(p.argv),
                "seconds": p.seconds,
                "user_s": p.user_s,
                "sys_s": p.sys_s,
                "max_rss_kib": p.max_rss_kib,
            }
            for p in procs
        ],
    )


def base_env() -> dict[str, str]:
    """This process's environment without tillage's settings (and with bytecode writes on,
    as a user's shell usually is)."""
    return {k: v for k, v in os.environ.items() if k not in SCRUBBED}


def wire_bytes(log: Path) -> dict[str, int]:
    """Bytes the ssh client sessions logged in `log` sent and received (0, 0 without any)."""
    sent = received = sessions = 0
    if log.exists():
        for match in TRANSFERRED.finditer(log.read_text(errors="replace")):
            sent += int(match.group(1))
            received += int(match.group(2))
            sessions += 1
    return {"wire_sent": sent, "wire_received": received, "ssh_sessions": sessions}


def du_bytes(path: Path) -> int:
    """What `du -sb` says of a folder (apparent bytes, directories included)."""
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


# -- the throwaway sshd -------------------------------------------------------------------------


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


# -- machines and lanes -------------------------------------------------------------------------


@dataclass
class Machine:
    """One simulated machine: a TILLAGE_HOME (its store) and a folder."""

    home: Path
    ws: Path

    def till(
        self,
        runner: Runner,
        args: list[str],
        extra: dict[str, str] | None = None,
        repo: bool = True,
        cwd: Path | None = None,
    ) -> dict[str, Any]:
        """`till [--repo WS] --json ARGS` as this machine; its one JSON document."""
        argv = [*Tillage.command, *(["--repo", str(self.ws)] if repo else []), "--json", *args]
        env = {**base_env(), "TILLAGE_HOME": str(self.home), **(extra or {})}
        proc = runner.run(argv, cwd or self.ws, env)
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise BenchError(
                f"`{shlex.join(proc.argv)}` did not print one JSON document: {exc}\n"
                f"stdout: {tail(proc.stdout)}"
            ) from exc
        if not isinstance(doc, dict) or "error" in doc:
            raise BenchError(f"`{shlex.join(proc.argv)}` answered {doc!r}")
        return doc


class TillLane:
    """tillage through one transport: A pushes, B clones and pulls."""

    def __init__(
        self, name: str, root: Path, logs: Path, sshd: Sshd | None, runner: Runner
    ) -> None:
        self.name = name
        self.a = Machine(root / "home-a", root / "a")
        self.b = Machine(root / "home-b", root / "b")
        self.far = root / "remote"
        self.sshd = sshd
        self.logs = logs
        self.runner = runner
        self.url = sshd.url(self.far) if sshd else str(self.far)
        self.key = ""

    def source(self) -> Path:
        return self.a.ws

    def dest(self) -> Path:
        return self.b.ws

    def remote_bytes(self) -> int:
        return du_bytes(self.far)

    def _env(self, step: str) -> tuple[dict[str, str], Path]:
        log = self.logs / f"{self.name}-{step}.ssh.log"
        return (self.sshd.tillage_env(log) if self.sshd else {}), log

    def _wire(self, log: Path) -> dict[str, int]:
        return wire_bytes(log) if self.sshd else {}

    def seal(self) -> dict[str, Any]:
        doc = self.a.till(self.runner, ["watch", "--no-daemon"])
        return {"head": doc["head"]["id"]}

    def remote_add(self) -> dict[str, Any]:
        env, log = self._env("remote-add")
        doc = self.a.till(self.runner, ["remote", "add", self.url], env)
        if not isinstance(doc.get("key"), str):
            raise BenchError(f"`till remote add` generated no key: {doc!r}")
        self.key = doc["key"]
        return self._wire(log)

    def push(self, step: str) -> dict[str, Any]:
        env, log = self._env(step)
        doc = self.a.till(self.runner, ["sync", "--push"], env)
        return {
            "bytes_sent": doc["uploaded_bytes"],
            "objects_sent": doc["uploaded_objects"],
            "objects_reused": doc["reused_objects"],
            "snapshot": doc["snapshot"]["id"],
            **self._wire(log),
        }

    def clone(self) -> dict[str, Any]:
        env, log = self._env("clone")
        args = ["clone", self.url, str(self.b.ws), "--key", self.key]
        doc = self.b.till(self.runner, args, env, repo=False, cwd=self.b.ws.parent)
        return {"head": doc["head"]["id"], **self._wire(log)}

    def pull(self, step: str) -> dict[str, Any]:
        env, log = self._env(step)
        doc = self.b.till(self.runner, ["sync", "--pull"], env)
        if doc.get("disposition") != "fast_forwarded":
            raise BenchError(f"{self.name}: the pull did not fast-forward: {doc!r}")
        return {
            "bytes_received": doc.get("fetched_bytes"),
            "objects_received": doc.get("fetched_objects"),
            **self._wire(log),
        }


class RsyncLane:
    """`rsync -a` of the same folder to a folder (locally or over the same ssh), and back."""

    def __init__(
        self, name: str, root: Path, src: Path, logs: Path, sshd: Sshd | None, runner: Runner
    ) -> None:
        self.name = name
        self.src = src
        self.far = root / "far"
        self.back = root / "b"
        self.sshd = sshd
        self.logs = logs
        self.runner = runner
        self.far.mkdir(parents=True)

    def source(self) -> Path:
        return self.src

    def dest(self) -> Path:
        return self.back

    def remote_bytes(self) -> int:
        return du_bytes(self.far)

    def _rsync(self, step: str, up: bool) -> dict[str, Any]:
        log = self.logs / f"{self.name}-{step}.ssh.log"
        far = self.sshd.rsync_spec(self.far) if self.sshd else f"{self.far}/"
        shell = ["-e", self.sshd.rsync_e(log)] if self.sshd else []
        src, dst = (f"{self.src}/", far) if up else (far, f"{self.back}/")
        proc = self.runner.run(["rsync", *RSYNC_FLAGS, *shell, src, dst], self.src, base_env())
        sent, received = RSYNC_SENT.search(proc.stdout), RSYNC_RECEIVED.search(proc.stdout)
        if sent is None or received is None:
            raise BenchError(f"rsync printed no --stats: {tail(proc.stdout)}")
        # The bytes that carried the files: what this side sent when it is the sender (a push,
        # or any local copy: there this process reads the files), else what it received.
        moved = sent if up or self.sshd is None else received
        facts: dict[str, Any] = {"bytes_sent" if up else "bytes_received": int(moved.group(1))}
        return {**facts, **(wire_bytes(log) if self.sshd else {})}

    def push(self, step: str) -> dict[str, Any]:
        return self._rsync(step, up=True)

    def clone(self) -> dict[str, Any]:
        return self._rsync("clone", up=False)

    def pull(self, step: str) -> dict[str, Any]:
        return self._rsync(step, up=False)


Lane = TillLane | RsyncLane


# -- the new data -------------------------------------------------------------------------------


def changed_line_bytes(old: bytes, new: bytes) -> int:
    """Bytes of the lines of `new` that are not in `old` (replaced or inserted), by difflib."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(
        sum(len(line) for line in b[j1:j2])
        for op, _i1, _i2, j1, j2 in matcher.get_opcodes()
        if op in ("replace", "insert")
    )


def new_data(before: Path, after: Path, change: workload.Mutation) -> dict[str, int]:
    """What the mutate added, three ways (see the module docstring)."""
    import zstandard

    compressor = zstandard.ZstdCompressor(level=3)
    edited_whole = edited_lines = added = packed = 0
    for rel in change.edited:
        new = (after / rel).read_bytes()
        edited_whole += len(new)
        edited_lines += changed_line_bytes((before / rel).read_bytes(), new)
        packed += len(compressor.compress(new))
    for rel in change.added:
        new = (after / rel).read_bytes()
        added += len(new)
        packed += len(compressor.compress(new))
    log = after / "logs" / "app.log"
    with open(log, "rb") as fh:
        fh.seek(log.stat().st_size - change.appended_bytes)
        packed += len(compressor.compress(fh.read()))
    appended = change.appended_bytes
    return {
        "edited": len(change.edited),
        "added": len(change.added),
        "deleted": len(change.deleted),
        "edited_whole_bytes": edited_whole,
        "edited_line_bytes": edited_lines,
        "added_bytes": added,
        "appended_bytes": appended,
        "files_bytes": edited_whole + added + appended,
        "lines_bytes": edited_lines + added + appended,
        "files_zstd3_bytes": packed,
    }


# -- follow -------------------------------------------------------------------------------------


def has_follow() -> bool:
    """Whether this tillage's `sync` takes --follow (`till contracts`)."""
    with tempfile.TemporaryDirectory(prefix="tillage-bench-contracts-") as home:
        env = {**base_env(), "TILLAGE_HOME": home}
        proc = run_measured([*Tillage.command, "--json", "contracts"], cwd=Path(home), env=env)
    try:
        verbs = json.loads(proc.stdout)["verbs"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise BenchError(f"`till contracts` answered {tail(proc.stdout)}") from exc
    for verb in verbs:
        if verb.get("command") == "sync":
            return any(p.get("name") == "follow" for p in verb.get("params", []))
    return False


@dataclass
class Follower:
    """One `till sync --follow` we started, its output in files."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def lines(self) -> list[dict[str, Any]]:
        docs: list[dict[str, Any]] = []
        for line in self.out.read_text(errors="replace").splitlines():
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                docs.append({"unparsed": line[:200]})
                continue
            docs.append(doc if isinstance(doc, dict) else {"unparsed": line[:200]})
        return docs

    def stop(self) -> int | None:
        """Ctrl-C, then SIGTERM, then SIGKILL, each after a bounded wait; the exit status."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.wait()


def cycle_summary(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """What one follower's cycles did: how many, their pulls, pushes, pauses and errors."""
    cycles = [doc for doc in lines if "cycle" in doc]
    pulled: dict[str, int] = {}
    for doc in cycles:
        key = str(doc.get("pulled"))
        pulled[key] = pulled.get(key, 0) + 1
    # Errors inside cycles, and anything else but the Ctrl-C that stopped it.
    errors = [doc for doc in cycles if doc.get("error")] + [
        doc
        for doc in lines
        if "cycle" not in doc and (doc.get("error") or {}).get("name") != "interrupted"
    ]
    # How long each kind of cycle took: from its start to the next one's, less the wait.
    took: dict[str, list[float]] = {"pushed": [], "fast_forwarded": [], "idle": []}
    for doc, after in itertools.pairwise(cycles):
        try:
            start = datetime.fromisoformat(doc["at"]).timestamp()
            end = datetime.fromisoformat(after["at"]).timestamp()
        except (KeyError, TypeError, ValueError):
            continue
        kind = (
            "pushed"
            if doc.get("pushed")
            else "fast_forwarded"
            if doc.get("pulled") == "fast_forwarded"
            else "idle"
        )
        took[kind].append(end - start - float(doc.get("retry_in") or 0))
    return {
        "cycles": len(cycles),
        "cycle_seconds": took,
        "pulled": pulled,
        "pushed": sum(1 for doc in lines if doc.get("pushed")),
        "paused": sum(1 for doc in lines if doc.get("paused")),
        "errors": len(errors),
        "first_errors": errors[:3],
    }


def start_follow(m: Machine, env: dict[str, str], poll_s: float, out: Path) -> Follower:
    argv = [*Tillage.command, "--repo", str(m.ws), "--json", "sync", "--follow"]
    argv += ["--poll-seconds", f"{poll_s:g}"]
    full = {**base_env(), "TILLAGE_HOME": str(m.home), **env}
    err = out.with_suffix(".err")
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            argv, cwd=m.ws, env=full, stdin=subprocess.DEVNULL, stdout=o, stderr=e
        )
    return Follower(proc, out, err)


def wait_visible(path: Path, content: bytes, deadline: float, followers: list[Follower]) -> float:
    """Polls until `path` holds `content`; the perf_counter time it did. A follower that died
    or the deadline is a BenchError."""
    while True:
        try:
            if path.read_bytes() == content:
                return time.perf_counter()
        except OSError:
            pass
        if time.perf_counter() > deadline:
            raise BenchError(f"{path.name} was not visible on B in time")
        for f in followers:
            if f.proc.poll() is not None:
                raise BenchError(
                    f"`till sync --follow` exited {f.proc.returncode}: "
                    f"{tail(f.err.read_text(errors='replace'))}"
                )
        time.sleep(VISIBLE_POLL_S)


def follow_samples(
    lane: TillLane,
    args: argparse.Namespace,
    tag: str,
    follow: bool,
    log: Log,
) -> dict[str, Any]:
    """Seal-to-visible from A to B: under --follow on both sides, or (without --follow) by a
    push on A then a pull on B. Returns the samples and the followers' cycle counts."""
    runner = lane.runner
    env, _log = lane._env(f"follow-{tag}")
    rng = random.Random(f"{args.seed}-{tag}-{lane.name}")
    samples: list[dict[str, float]] = []
    followers: list[Follower] = []
    out: dict[str, Any] = {"mode": "follow" if follow else "push-pull loop"}
    try:
        if follow:
            # Two machines poll out of step: B starts a random part of a poll after A.
            out["b_started_after_s"] = rng.uniform(0, args.poll_seconds)
            for side, m in (("a", lane.a), ("b", lane.b)):
                if side == "b":
                    time.sleep(out["b_started_after_s"])
                path = lane.logs / f"{lane.name}-follow-{tag}-{side}.jsonl"
                followers.append(start_follow(m, env, args.poll_seconds, path))
            deadline = time.perf_counter() + FOLLOW_READY_S
            while not all(f.out.stat().st_size for f in followers):
                if time.perf_counter() > deadline or any(
                    f.proc.poll() is not None for f in followers
                ):
                    raise BenchError(
                        "`till sync --follow` did not report a first cycle: "
                        + " | ".join(tail(f.err.read_text(errors="replace"), 5) for f in followers)
                    )
                time.sleep(0.05)
        for i in range(args.follow_samples):
            if follow:  # start anywhere in the poll cycle, not in step with it
                time.sleep(rng.uniform(0, args.poll_seconds))
            rel = f"sync-probe-{tag}-{i}.txt"
            content = f"{rng.getrandbits(256):064x}\n".encode()
            written = time.perf_counter()
            (lane.a.ws / rel).write_bytes(content)
            runner.procs = []
            lane.a.till(runner, ["snap"])
            sealed = time.perf_counter()
            snap_s = runner.procs[-1].seconds
            if follow:
                timeout = 60 + 10 * args.poll_seconds
                seen = wait_visible(lane.b.ws / rel, content, sealed + timeout, followers)
            else:
                lane.a.till(runner, ["sync", "--push"], env)
                lane.b.till(runner, ["sync", "--pull"], env)
                seen = time.perf_counter()
                if (lane.b.ws / rel).read_bytes() != content:
                    raise BenchError(f"{rel} is not on B after the push and the pull")
            samples.append(
                {
                    "seal_to_visible_s": seen - sealed,
                    "write_to_visible_s": seen - written,
                    "snap_s": snap_s,
                }
            )
        log(
            f"  {lane.name} {out['mode']}: seal-to-visible "
            + " ".join(f"{s['seal_to_visible_s']:.2f}" for s in samples)
        )
    finally:
        statuses = [f.stop() for f in followers]
    if followers:
        out["follow_exit"] = statuses
        out["followers"] = [cycle_summary(f.lines()) for f in followers]
    out["samples"] = samples
    return out


# -- one repeat ---------------------------------------------------------------------------------


def rotated(items: tuple[str, ...], by: int) -> list[str]:
    k = by % len(items)
    return [*items[k:], *items[:k]]


def check_same(expected: dict[str, str], folder: Path, what: str) -> None:
    actual = manifest(folder, EXCLUDED)
    if actual != expected:
        missing = sorted(expected.keys() - actual.keys())
        extra = sorted(actual.keys() - expected.keys())
        changed = sorted(k for k in expected.keys() & actual.keys() if expected[k] != actual[k])
        raise BenchError(
            f"{what}: {len(missing)} missing {missing[:5]}, {len(extra)} unexpected "
            f"{extra[:5]}, {len(changed)} different {changed[:5]}"
        )


def one_repeat(
    args: argparse.Namespace,
    index: int,
    base: Path,
    expected_cold: dict[str, str],
    sshd: Sshd,
    root: Path,
    follow: bool,
    log: Log,
) -> dict[str, Any]:
    """Every lane through every phase on fresh copies and empty remotes."""
    runner = Runner()
    logs = root / "logs"
    logs.mkdir(parents=True)
    tills = {
        "tillage-dir": TillLane("tillage-dir", root / "tillage-dir", logs, None, runner),
        "tillage-ssh": TillLane("tillage-ssh", root / "tillage-ssh", logs, sshd, runner),
    }
    for lane in tills.values():
        lane.a.home.mkdir(parents=True)
        lane.b.home.mkdir()
        subprocess.run(["cp", "-a", str(base), str(lane.a.ws)], check=True)
    lanes: dict[str, Lane] = {
        **tills,
        # rsync mirrors the same folders tillage pushes (its .tillage/ excluded).
        "rsync-local": RsyncLane(
            "rsync-local", root / "rsync-local", tills["tillage-dir"].a.ws, logs, None, runner
        ),
        "rsync-ssh": RsyncLane(
            "rsync-ssh", root / "rsync-ssh", tills["tillage-ssh"].a.ws, logs, sshd, runner
        ),
    }
    steps: dict[str, dict[str, Step]] = {name: {} for name in LANES}
    for name in rotated(("tillage-dir", "tillage-ssh"), index):
        steps[name]["seal"] = timed(runner, tills[name].seal)
        steps[name]["remote_add"] = timed(runner, tills[name].remote_add)

    def phase(label: str, act: Callable[[Lane], dict[str, Any]]) -> None:
        for name in rotated(LANES, index):
            steps[name][label] = timed(runner, lambda lane=lanes[name]: act(lane))
        log(f"  {label}: " + " ".join(f"{n}={steps[n][label].seconds:.2f}s" for n in LANES))

    phase("cold_push", lambda lane: lane.push("cold-push"))
    remote_bytes = {name: lane.remote_bytes() for name, lane in lanes.items()}
    phase("clone", lambda lane: lane.clone())
    for name, lane in lanes.items():
        check_same(expected_cold, lane.dest(), f"{name}: the clone")
    changes = [workload.mutate(t.a.ws, seed=args.seed + 1) for t in tills.values()]
    if changes[0] != changes[1]:
        raise BenchError("the standard mutate changed the two source folders differently")
    added = new_data(base, tills["tillage-dir"].a.ws, changes[0])
    expected_after = manifest(tills["tillage-dir"].a.ws, EXCLUDED)
    check_same(expected_after, tills["tillage-ssh"].a.ws, "the mutated source folders")
    phase("incr_push", lambda lane: lane.push("incr-push"))
    phase("incr_pull", lambda lane: lane.pull("incr-pull"))
    for name, lane in lanes.items():
        check_same(expected_after, lane.dest(), f"{name}: the incremental pull")
    follows: dict[str, Any] = {}
    if args.follow_samples:
        for name in rotated(("tillage-dir", "tillage-ssh"), index):
            follows[name] = follow_samples(tills[name], args, f"r{index}", follow, log)
    return {
        "steps": {
            lane: {label: vars(step) for label, step in by_label.items()}
            for lane, by_label in steps.items()
        },
        "remote_bytes": remote_bytes,
        "new_data": added,
        "follow": follows,
    }


# -- the report ---------------------------------------------------------------------------------


def med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else ""


def mib(v: float | None) -> str:
    return "" if v is None else f"{v / MIB:.2f}"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def transport_table(repeats: list[dict[str, Any]], till: str, rsync: str, ssh: bool) -> str:
    """One transport's rows: tillage against rsync -a, medians over the repeats."""

    def step(lane: str, label: str, key: str) -> float | None:
        vals = [r["steps"][lane][label].get(key) for r in repeats if label in r["steps"][lane]]
        return med([v for v in vals if v is not None])

    def fact(lane: str, label: str, key: str) -> float | None:
        vals = [r["steps"][lane][label]["facts"].get(key) for r in repeats]
        return med([v for v in vals if v is not None])

    rows: list[list[str]] = []

    def row(label: str, t: float | None, r: float | None, fmt: str, note: str = "") -> None:
        def show(v: float | None) -> str:
            if v is None:
                return ""
            return mib(v) if fmt == "mib" else f"{v:{fmt}}"

        rows.append([label, show(t), show(r), ratio(t, r), note])

    new = med([r["new_data"]["files_bytes"] for r in repeats])
    for label, title in (
        ("cold_push", "cold push"),
        ("clone", "cold clone"),
        ("incr_push", "incremental push"),
        ("incr_pull", "incremental pull"),
    ):
        up = label in ("cold_push", "incr_push")
        note = {
            "cold_push": "`till sync --push` (folder sealed, remote added before); "
            "rsync into an empty folder",
            "clone": "`till clone URL DEST --key K` into a new folder; rsync back into one",
            "incr_push": "after the standard mutate: `till sync --push` (it seals the change "
            "first); rsync of the folder again",
            "incr_pull": "`till sync --pull` (fast-forward) on the clone; rsync back again",
        }[label]
        row(
            f"{title} (s)", step(till, label, "seconds"), step(rsync, label, "seconds"), ".2f", note
        )
        row(
            "↳ user / sys CPU, this side (s)",
            None,
            None,
            "",
            f"tillage {step(till, label, 'user_s') or 0:.2f} / "
            f"{step(till, label, 'sys_s') or 0:.2f}, rsync "
            f"{step(rsync, label, 'user_s') or 0:.2f} / {step(rsync, label, 'sys_s') or 0:.2f}",
        )
        key = "bytes_sent" if up else "bytes_received"
        what = (
            "tillage: uploaded_bytes (sealed, compressed objects); rsync: --stats bytes sent"
            if up
            else "tillage: fetched_bytes; rsync: the --stats bytes that carried the files "
            "(received over ssh, sent by the local copy)"
        )
        if label == "clone":
            what = "tillage's clone reports no byte count; rsync as for a pull"
        row(
            f"↳ {'sent' if up else 'received'} (MiB)",
            fact(till, label, key),
            fact(rsync, label, key),
            "mib",
            what,
        )
        if up:
            row(
                "↳ objects sent / already there",
                None,
                None,
                "",
                f"tillage {fact(till, label, 'objects_sent') or 0:.0f} / "
                f"{fact(till, label, 'objects_reused') or 0:.0f}",
            )
        if label == "incr_push" and new:
            t_sent, r_sent = fact(till, label, key), fact(rsync, label, key)
            row(
                "↳ sent / new data",
                t_sent / new if t_sent is not None else None,
                r_sent / new if r_sent is not None else None,
                ".3f",
                f"new data = {mib(new)} MiB (whole changed and added files + the appended log)",
            )
        if ssh:
            wire = "wire_sent" if up else "wire_received"
            row(
                f"↳ on the wire, ssh {'sent' if up else 'received'} (MiB)",
                fact(till, label, wire),
                fact(rsync, label, wire),
                "mib",
                "the ssh client's own count (its sessions' Transferred: lines)",
            )
    row(
        "remote after the cold push (MiB, du -sb)",
        med([r["remote_bytes"][till] for r in repeats]),
        med([r["remote_bytes"][rsync] for r in repeats]),
        "mib",
        "tillage: the encrypted remote; rsync: the mirrored folder",
    )
    seal = step(till, "seal", "seconds")
    add = step(till, "remote_add", "seconds")
    cold = step(till, "cold_push", "seconds")
    if seal is not None and add is not None and cold is not None:
        row(
            "from an unsealed folder (s)",
            seal + add + cold,
            step(rsync, "cold_push", "seconds"),
            ".2f",
            f"tillage: `till watch --no-daemon` {seal:.2f} + `till remote add` {add:.2f} + push",
        )
    peak = [max(s["max_rss_kib"] for s in r["steps"][till].values()) for r in repeats]
    rpeak = [max(s["max_rss_kib"] for s in r["steps"][rsync].values()) for r in repeats]
    row(
        "peak RSS, this side (MiB)",
        max(peak) * 1024,
        max(rpeak) * 1024,
        "mib",
        "the largest ru_maxrss of the lane's processes here (the far side's is not counted)",
    )
    return markdown(["measure", "tillage", "rsync -a", "tillage/rsync", "note"], rows)


def follow_table(repeats: list[dict[str, Any]], poll_s: float) -> str:
    rows: list[list[str]] = []
    for lane, title in (("tillage-dir", "directory"), ("tillage-ssh", "ssh (loopback)")):
        found = [r["follow"][lane] for r in repeats if lane in r["follow"]]
        samples = [s for f in found for s in f["samples"]]
        if not samples:
            continue
        seal = [s["seal_to_visible_s"] for s in samples]
        write = [s["write_to_visible_s"] for s in samples]
        snap = [s["snap_s"] for s in samples]
        rows.append(
            [
                title,
                found[0]["mode"],
                str(len(samples)),
                f"{statistics.median(seal):.2f}",
                f"{min(seal):.2f} .. {max(seal):.2f}",
                f"{statistics.median(write):.2f}",
                f"{statistics.median(snap):.2f}",
            ]
        )
    header = [
        "transport",
        f"how (poll {poll_s:g} s)",
        "samples",
        "seal → visible on B, median (s)",
        "min .. max (s)",
        "write → visible, median (s)",
        "`till snap` on A (s)",
    ]
    return markdown(header, rows)


def follower_lines(repeats: list[dict[str, Any]]) -> list[str]:
    """What the followers did over the run, per transport and side (summed over repeats)."""
    out: list[str] = []
    for lane in ("tillage-dir", "tillage-ssh"):
        found = [r["follow"][lane] for r in repeats if r["follow"].get(lane, {}).get("followers")]
        if not found:
            continue
        parts = []
        for side, index in (("A", 0), ("B", 1)):
            runs = [f["followers"][index] for f in found]
            pulled: dict[str, int] = {}
            for run in runs:
                for key, n in run["pulled"].items():
                    pulled[key] = pulled.get(key, 0) + n
            shown = ", ".join(f"{k} {n}" for k, n in sorted(pulled.items()))
            took = {
                kind: [t for run in runs for t in run["cycle_seconds"][kind]]
                for kind in ("pushed", "fast_forwarded", "idle")
            }
            durations = ", ".join(
                f"{kind.replace('_', '-')} {statistics.median(ts):.2f} s"
                for kind, ts in took.items()
                if ts
            )
            parts.append(
                f"{side} {sum(r['cycles'] for r in runs)} cycles (pulled: {shown}; pushed "
                f"{sum(r['pushed'] for r in runs)}; paused {sum(r['paused'] for r in runs)}; "
                f"errors {sum(r['errors'] for r in runs)}; a cycle took, median: {durations})"
            )
        exits = [f.get("follow_exit") for f in found]
        out.append(f"{lane} followers: " + "; ".join(parts) + f"; exit statuses {exits}")
    return out


def new_data_line(nd: dict[str, int]) -> str:
    return (
        f"The standard mutate: {nd['edited']} files edited ({mib(nd['edited_whole_bytes'])} MiB "
        f"as whole files, {nd['edited_line_bytes'] / 1024:.1f} KiB of changed lines), "
        f"{nd['added']} added ({nd['added_bytes'] / 1024:.1f} KiB), {nd['deleted']} deleted, "
        f"{mib(nd['appended_bytes'])} MiB appended to the log. New data: "
        f"{mib(nd['files_bytes'])} MiB as whole files plus the append "
        f"({mib(nd['files_zstd3_bytes'])} MiB after zstd -3, file by file), "
        f"{mib(nd['lines_bytes'])} MiB as changed lines plus the added files and the append."
    )


def report(results: dict[str, Any]) -> str:
    machine = results["machine"]
    stats = results["workload"]
    repeats = results["repeats"]
    v = results["versions"]
    lines = [
        f"Command: `{results['command']}`",
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']}, "
        f"{machine['python']}, {machine['platform']}, scratch dir on {machine['workdir_fs']}, "
        f"load {machine['load_before']:.2f} at start",
        f"Versions: {v['tillage']} at {v['tillage_commit']} (from {v['tillage_source']}), "
        f"bench/sync.py at {v['commit']}; "
        f"{v['rsync']}; {v['ssh']}",
        f"Workload: {stats['files']} files, {stats['bytes'] / MIB:.1f} MiB (seed {stats['seed']}, "
        f"scale {stats['scale']}); medians of {len(repeats)} repeats, lanes in rotated order",
    ]
    if stats["scale"] != 1.0:
        lines.append("NOTE: scale != 1.0 — a smoke run.")
    if machine["load_before"] > BUSY_LOAD:
        lines.append(
            f"WARNING: load average was {machine['load_before']:.2f} at the start: something "
            "else was using the CPU (the lanes of a repeat share the drift)."
        )
    lines += [
        "",
        "Directory remote (a folder on the same disk), against `rsync -a` into a local folder:",
        "",
        transport_table(repeats, "tillage-dir", "rsync-local", ssh=False),
        "",
        "SSH on loopback (our sshd on 127.0.0.1), against `rsync -a` over the same ssh:",
        "",
        transport_table(repeats, "tillage-ssh", "rsync-ssh", ssh=True),
        "",
        new_data_line(repeats[0]["new_data"]),
    ]
    if any(r["follow"] for r in repeats):
        lines += [
            "",
            "Seal on A to the file on B:",
            "",
            follow_table(repeats, results["poll_seconds"]),
            "",
            *follower_lines(repeats),
        ]
        if not results["follow_available"]:
            lines.append(
                "NOTE: this tillage has no `till sync --follow`: measured as `till sync --push` "
                "on A, then `till sync --pull` on B, right after the seal."
            )
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------------


def versions(at: str | None) -> dict[str, str]:
    def first_line(argv: list[str]) -> str:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return ((proc.stdout or proc.stderr).strip().splitlines() or ["unknown"])[0]

    def git(*argv: str) -> str:
        repo = Path(__file__).resolve().parent.parent
        proc = subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True)
        return proc.stdout.strip()

    probe = subprocess.run(
        [*Tillage.command[:1], "-c", "import tillage; print(tillage.__file__)"],
        capture_output=True,
        text=True,
        env=base_env(),
        check=False,
    )
    source = str(Path(probe.stdout.strip()).parent.parent) if probe.returncode == 0 else "?"
    in_repo = source == str(Path(__file__).resolve().parent.parent / "src")
    changed = in_repo and git("status", "--porcelain", "src")
    dirty = " (its src/ has uncommitted changes, which ran)" if changed else ""
    return {
        "tillage": Tillage.version(),
        "commit": (git("log", "-1", "--format=%h", "--", "bench/sync.py") or "unknown")
        + (" (modified)" if git("status", "--porcelain", "bench/sync.py") else "")
        + dirty,
        "tillage_commit": at or "the working tree",
        "tillage_source": source,
        "rsync": first_line(["rsync", "--version"]).replace("  ", " "),
        "ssh": first_line(["ssh", "-V"]),
    }


def benchmark(args: argparse.Namespace, scratch: Path, log: Log) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    follow = has_follow()
    if not follow:
        log("this tillage has no `till sync --follow`: measuring push on A then pull on B")
    base = scratch / "base"
    log(f"generating workload (seed={args.seed}, scale={args.scale}) in {base}")
    stats = workload.generate(base, seed=args.seed, scale=args.scale)
    log(f"workload: {stats.files} files, {stats.bytes / MIB:.1f} MiB in {stats.seconds:.1f} s")
    expected = manifest(base, EXCLUDED)
    far_till = args.remote_till or this_till()
    if args.at and not args.remote_till:  # sshd passes no environment: give it the commit's src
        far_till = shlex.join(["/usr/bin/env", f"PYTHONPATH={os.environ['PYTHONPATH']}", far_till])
    sshd = start_sshd(scratch / "sshd", far_till)
    repeats: list[dict[str, Any]] = []
    try:
        for i in range(args.repeat):
            log(f"repeat {i + 1}/{args.repeat}")
            root = scratch / f"r{i}"
            repeats.append(one_repeat(args, i, base, expected, sshd, root, follow, log))
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        sshd.stop()
    results: dict[str, Any] = {
        "command": "python bench/sync.py " + shlex.join(sys.argv[1:]),
        "machine": machine_facts(scratch, load_before),
        "versions": versions(args.at),
        "workload": {
            "files": stats.files,
            "bytes": stats.bytes,
            "seed": args.seed,
            "scale": args.scale,
        },
        "poll_seconds": args.poll_seconds,
        "follow_available": follow,
        "repeats": repeats,
    }
    results["table"] = report(results)
    return results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repeats (medians reported)")
    parser.add_argument("--till", help="command that runs till (default: python -m tillage)")
    parser.add_argument(
        "--remote-till",
        help="tillage on the far side of ssh (default: the `till` beside this python)",
    )
    parser.add_argument(
        "--at",
        metavar="REV",
        help="run tillage as committed at REV (git archive of src/ on PYTHONPATH, both sides), "
        "not the working tree",
    )
    parser.add_argument("--seed", type=int, default=0, help="workload seed (mutate: seed+1)")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the workload (smoke runs)")
    parser.add_argument("--workdir", type=Path, help="parent of the scratch dir (default: temp)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir")
    parser.add_argument(
        "--poll-seconds", type=float, default=1.0, help="--follow's poll interval (default 1)"
    )
    parser.add_argument(
        "--follow-samples",
        type=int,
        default=8,
        help="seal-to-visible samples per transport and repeat (default 8; 0 skips)",
    )
    parser.add_argument("--out", type=Path, help="write the full results as JSON here")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.follow_samples < 0 or args.poll_seconds <= 0:
        parser.error("--repeat must be >= 1, --follow-samples >= 0, --poll-seconds > 0")
    return args


def use_commit(rev: str, dest: Path, log: Log) -> str:
    """Runs tillage as committed at `rev` (its src/ exported to `dest`, first on PYTHONPATH
    here and on the far side), not the working tree others may be editing. Returns the
    commit's short ID."""
    repo = Path(__file__).resolve().parent.parent
    found = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise ToolMissingError(f"--at {rev}: not a commit of {repo}")
    commit = found.stdout.strip()
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", commit, "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    src = str(dest / "src")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (src, os.environ.get("PYTHONPATH", "")) if p
    )
    log(f"tillage as committed at {commit}, from {src}")
    return commit


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark: 0 when everything ran and every copy was right, 1 otherwise."""
    args = parse_args(argv)
    if args.till:
        Tillage.command = shlex.split(args.till)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="tillage-sync-", dir=args.workdir)).resolve()
    log(f"scratch dir: {scratch}")
    try:
        if args.at:
            args.at = use_commit(args.at, scratch / "tillage-src", log)
        Tillage.check_available()  # also compiles tillage's bytecode, as an install would
        if shutil.which("rsync") is None:
            raise ToolMissingError("rsync is not installed (apt-get install rsync)")
        results = benchmark(args, scratch, log)
    except (BenchError, ToolMissingError) as exc:
        log(f"FAILED: {tail(str(exc), 40)}")
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    print(results["table"])
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
