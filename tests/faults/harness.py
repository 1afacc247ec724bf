"""Shared tools of the fault tests: folder states, manifests, crashing `till`, damaging a store."""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.conftest import Till
from tillage.core.paths import CONTROL_DIR
from tillage.store.packs import HEADER_SIZE, ScannedRecord, iter_packs, scan_pack
from tillage.store.publog import GENESIS, PublicationLog

# Runs the real command line with one failpoint armed: argv is NAME ACTION till-args...
CRASH_SCRIPT = (
    "import sys\n"
    "from tillage.platform import failpoints\n"
    "failpoints.arm(sys.argv[1], sys.argv[2])\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[3:]))\n"
)

SEAL_FAILPOINTS = (
    "pack.after_write",
    "pack.after_fsync",
    "objects.after_pack_fsync",
    "seal.before_publish",
    "publog.before_append",
    "publog.before_fsync",
    "publish.after_log",
    "seal.after_publish",
)
# A crash at these points leaves the snapshot's log line written: it is published.
PUBLISHED_AT = frozenset({"publog.before_fsync", "publish.after_log", "seal.after_publish"})

REWIND_FAILPOINTS = (
    "rewind.after_intent",
    "rewind.after_first_action",
    "rewind.before_intent_removed",
)

# A gc's durable steps (features/lifecycle/gc.py, store/sweep.py): its fact is published
# before the first.
GC_FAILPOINTS = (
    "gc.after_publish",
    "gc.after_dead_index",
    "gc.after_copy",
    "gc.after_pack_fsync",
    "gc.after_index",
    "gc.after_first_delete",
)

TMP_MARK = ".tillage-tmp-"

# A folder state: path -> bytes (a file), ("dir",), ("link", target) or ("exec", bytes).
Spec = Mapping[str, Any]
# What a user sees of a folder: path -> (type, permission bits, bytes or link target).
Manifest = dict[str, tuple[str, int, bytes | None]]


def noise(seed: int, size: int) -> bytes:
    """Incompressible, reproducible bytes (a file larger than one chunk when size > 512 KiB)."""
    return random.Random(seed).randbytes(size)


def clear(root: Path) -> None:
    """Removes everything in the folder except tillage's own pointer."""
    for child in root.iterdir():
        if child.name == CONTROL_DIR:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def write_state(root: Path, spec: Spec) -> None:
    """Makes the folder hold exactly `spec` (besides `.tillage/`)."""
    clear(root)
    for path in sorted(spec):
        value = spec[path]
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, bytes):
            target.write_bytes(value)
            target.chmod(0o644)
        elif value[0] == "dir":
            target.mkdir(exist_ok=True)
        elif value[0] == "link":
            os.symlink(value[1], target)
        elif value[0] == "exec":
            target.write_bytes(value[1])
            target.chmod(0o755)
        else:
            raise ValueError(value)


def manifest(root: Path) -> Manifest:
    """Returns path -> (type, mode, content) for everything below `root` but `.tillage/`."""
    out: Manifest = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            rel_dir = ""
            if CONTROL_DIR in dirnames:
                dirnames.remove(CONTROL_DIR)
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = f"{rel_dir}/{name}" if rel_dir else name
            st = os.lstat(full)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.fsencode(os.readlink(full)))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode, None)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", mode, Path(full).read_bytes())
            else:
                out[rel] = ("special", mode, None)
    return out


def temp_leftovers(root: Path) -> list[str]:
    """Returns every path below `root` that is a rewind's temporary file."""
    return [os.path.join(d, n) for d, ds, fs in os.walk(root) for n in ds + fs if TMP_MARK in n]


def crash(till: Till, failpoint: str, action: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs `till ARGS` as a real process with `failpoint` armed to `action`."""
    return subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, failpoint, action, *args],
        cwd=till.cwd,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_crashed(proc: subprocess.CompletedProcess[str], failpoint: str, action: str) -> None:
    """Asserts the process really stopped at `failpoint` (so the test is not vacuous)."""
    if action == "kill":
        assert proc.returncode == -9, (proc.returncode, proc.stdout, proc.stderr)
        return
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert error["name"] == "internal"
    assert f"FailpointCrashError: {failpoint}" in error["message"]


def snapshot_ids(till: Till) -> list[str]:
    """The workspace's snapshot IDs, newest first, as `till timeline` shows them."""
    return [s["id"] for s in till.json("timeline", "-n", "1000")["snapshots"]]


def rewind(till: Till, snapshot: str, *extra: str) -> dict[str, Any]:
    doc = till.json("rewind", snapshot, "--yes", *extra)
    assert doc["applied"] is True
    return dict(doc)


# -- the store's bytes -------------------------------------------------------------------------


def packs(home: Path) -> list[Path]:
    return list(iter_packs(home / "packs"))


def records(home: Path) -> list[ScannedRecord]:
    return [r for pack in packs(home) for r in scan_pack(pack).records]


def record_of(home: Path, object_id: bytes) -> ScannedRecord:
    found = [r for r in records(home) if r.id == object_id]
    assert found, f"no record holds {object_id.hex()}"
    return found[0]


def patch_file(path: Path, offset: int, data: bytes) -> None:
    """Overwrites bytes of a (possibly read-only) store file in place."""
    path.chmod(0o644)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "rb") as f:
        f.seek(offset)
        old = f.read(1)
    patch_file(path, offset, bytes([old[0] ^ 0x20]))


def flip_payload(home: Path, object_id: bytes) -> ScannedRecord:
    """Damages one byte inside the payload of the record that holds `object_id`."""
    rec = record_of(home, object_id)
    payload = rec.location.length - HEADER_SIZE - 4
    flip_byte(home / "packs" / rec.location.pack, rec.location.offset + HEADER_SIZE + payload // 2)
    return rec


def log_path(home: Path) -> Path:
    return home / "log" / "publication.log"


def log_records(home: Path) -> list[dict[str, Any]]:
    """Reads the whole publication log, asserting it is whole and its hash chain intact."""
    raw = log_path(home).read_bytes()
    assert raw.endswith(b"\n"), "the log ends in a torn line"
    found = [
        {"seq": r.seq, "kind": r.kind, "body": r.body}
        for r in PublicationLog(log_path(home)).read_from(0, GENESIS)
    ]
    assert len(found) == raw.count(b"\n")
    assert [r["seq"] for r in found] == list(range(1, len(found) + 1))
    return found


def logged_snapshots(home: Path) -> list[str]:
    return [r["body"]["id"] for r in log_records(home) if r["kind"] == "snapshot"]


def remove_index(home: Path) -> None:
    for path in home.glob("index.sqlite*"):
        path.unlink()


# -- folder states the tests move between ------------------------------------------------------

STATE_A: dict[str, Any] = {
    "README.md": b"hello\n",
    "src/app.py": b"print('a')\n",
    "src/lib/util.py": b"x = 1\n",
    "bin/run.sh": ("exec", b"#!/bin/sh\necho a\n"),
    "link": ("link", "src/app.py"),
    "big.bin": noise(1, 700 * 1024),
    "empty": ("dir",),
}

# A wreck of A: edits, deletions, additions, type changes both ways, a new link target, a mode.
STATE_B: dict[str, Any] = {
    "README.md/inside.txt": b"a folder where a file was\n",
    "src/app.py": b"print('b')\n" * 50,
    "bin/run.sh": b"#!/bin/sh\necho a\n",
    "link": ("link", "README.md"),
    "big.bin": noise(1, 300 * 1024) + b"EDIT" + noise(1, 700 * 1024)[300 * 1024 + 4 :],
    "empty": b"a file where a folder was\n",
    "new/deep/file.txt": b"new\n",
}

STATE_C: dict[str, Any] = {
    "README.md": b"third\n",
    "src/app.py": b"print('c')\n",
    "notes.txt": noise(3, 2000),
    "link": ("link", "notes.txt"),
}


# -- SIGKILL at a random moment (the kill campaigns) -------------------------------------------

# Every failpoint the campaign watches pass by: they mark the phases of a seal and a rewind.
MARKERS = (*SEAL_FAILPOINTS, "rewind.after_staging", *REWIND_FAILPOINTS)
# ... and of making, removing and merging a fork (a merge lands as a rewind, then seals).
UNIVERSE_MARKERS = (
    *MARKERS,
    "merge.after_seal",
    "fork.after_intent",
    "fork.after_copy",
    "fork.after_snapshot",
    "fork.after_record",
    "fork.after_rename",
    "fork.remove.after_trash",
    "fork.remove.after_record",
)
# Passed by every marked process just before the command line's `main` runs: the interpreter
# has started and imported it, so a window from here is the command's own work.
START_MARK = "till.main"

# Defines arm_markers(report, ack, anchor, names): each failpoint in `names` reports its passes
# (name and CLOCK_MONOTONIC, which every process shares) on the pipe `report`; at the Nth pass
# of the anchor "NAME#N" ("NAME": the first) it stops until a byte arrives on (or the test
# closes) the pipe `ack`. Returns the marker maker, so the script can pass START_MARK itself.
_ARM_MARKERS = (
    "def arm_markers(report, ack, anchor, names):\n"
    "    import os, threading, time\n"
    "    from tillage.platform import failpoints\n"
    "    stop_at, _, nth = anchor.partition('#')\n"
    "    passes, lock = {}, threading.Lock()\n"
    "    def marker(name):\n"
    "        def hit():\n"
    "            with lock:\n"
    "                passes[name] = passes.get(name, 0) + 1\n"
    "                stop = name == stop_at and passes[name] == int(nth or 1)\n"
    "                os.write(report, f'{name} {time.monotonic_ns()}\\n'.encode())\n"
    "            if stop:\n"
    "                os.read(ack, 1)\n"
    "        return hit\n"
    "    for name in names:\n"
    "        failpoints.arm(name, marker(name))\n"
    "    return marker\n"
)

# Runs the real command line with the markers armed. argv: REPORT ACK ANCHOR NAMES args...
MARK_SCRIPT = _ARM_MARKERS + (
    "import sys\n"
    "report, ack, anchor, names = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]\n"
    "marker = arm_markers(report, ack, anchor, names.split(','))\n"
    "from tillage.hosts.cli.main import main\n"
    f"marker({START_MARK!r})()\n"
    "sys.exit(main(sys.argv[5:]))\n"
)


def _pass_of(spec: str) -> tuple[str, int | None]:
    """ "NAME#N" -> (NAME, N), the Nth pass of the failpoint; "NAME" -> (NAME, None)."""
    name, _, nth = spec.partition("#")
    return name, int(nth) if nth else None


@dataclass
class Killed:
    """One `till` process the campaign ran: how it ended and the markers it passed, in order.

    `returncode` is -9 when the kill landed, else the command's own exit code (it finished first).
    `marks` holds (failpoint, CLOCK_MONOTONIC ns); `start_ns`/`end_ns` bracket the process.
    A marker is named "NAME" (its first pass, or the first at or after a moment) or "NAME#N"
    (its Nth pass).
    """

    returncode: int
    marks: list[tuple[str, int]]
    start_ns: int
    end_ns: int
    stdout: str
    stderr: str

    def passed(self, spec: str) -> bool:
        return self.at(spec) is not None

    def at(self, spec: str | None, after_ns: int = 0) -> int | None:
        """When the process passed `spec` at or after `after_ns` (None: when it started)."""
        if spec is None:
            return self.start_ns
        name, nth = _pass_of(spec)
        times = [at for mark, at in self.marks if mark == name]
        if nth is not None:
            return times[nth - 1] if len(times) >= nth and times[nth - 1] >= after_ns else None
        return next((at for at in times if at >= after_ns), None)

    def last(self, before_ns: int | None = None) -> str | None:
        """The last marker passed (before `before_ns`), as "NAME#N"; None when none was."""
        counts: dict[str, int] = {}
        found = None
        for mark, at in self.marks:
            counts[mark] = counts.get(mark, 0) + 1
            if before_ns is None or at <= before_ns:
                found = f"{mark}#{counts[mark]}"
        return found

    def span(self, start: str | None, stop: str | None) -> float:
        """Seconds from `start` (None: process start) to the first pass of `stop` after it
        (None: process end); 0 when the process never passed them."""
        begin = self.at(start)
        if begin is None:
            return 0.0
        end = self.end_ns if stop is None else self.at(stop, begin)
        return 0.0 if end is None else max(0.0, (end - begin) / 1e9)


class _Marks:
    """Reads the marker pipe of one process line by line, with a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.marks: list[tuple[str, int]] = []
        self.eof = False

    def _read(self, timeout: float) -> None:
        ready, _w, _x = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return
        data = os.read(self.fd, 65536)
        if not data:
            self.eof = True
            return
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            name, at = line.decode().split()
            self.marks.append((name, int(at)))

    def wait_for(self, spec: str, timeout: float) -> bool:
        """Reads until `spec` is passed (True) or the process ends without passing it."""
        name, nth = _pass_of(spec)
        deadline = time.monotonic() + timeout
        while sum(1 for mark, _at in self.marks if mark == name) < (nth or 1):
            if self.eof or time.monotonic() > deadline:
                return False
            self._read(deadline - time.monotonic())
        return True

    def drain(self) -> list[tuple[str, int]]:
        while not self.eof:
            self._read(30)
        return self.marks


def _kill_when(
    reader: _Marks,
    ack_w: int,
    alive: Callable[[], bool],
    kill: Callable[[], None],
    anchor: str | None,
    kill_after: float | None,
) -> None:
    """Kills the process `kill_after` seconds after it passes `anchor` (after it starts when
    `anchor` is None); at once, standing at the anchor, when `kill_after` is 0."""
    if kill_after is None:
        return
    reached = anchor is None or reader.wait_for(anchor, timeout=120)
    if not reached:
        return
    if kill_after > 0:
        if anchor is not None:
            os.write(ack_w, b"go")
        # Not a wait for behaviour: this sleep *is* the random kill moment.
        time.sleep(kill_after)
    if alive():
        kill()


def run_marked(
    till: Till,
    args: Sequence[str],
    *,
    anchor: str | None = None,
    kill_after: float | None = None,
    marked: bool = True,
    markers: Sequence[str] = MARKERS,
) -> Killed:
    """Runs `till ARGS` and SIGKILLs it `kill_after` seconds after it passes `anchor` (after it
    starts when `anchor` is None); `kill_after=None` lets it finish (a timing run).

    With `anchor` and `kill_after=0` the kill lands exactly at the failpoint. `marked=False` runs
    the real `python -m tillage` with nothing armed (markers are then not reported). `markers`
    are the failpoints reported (the seal's and the rewind's unless told).
    """
    report_r, report_w = os.pipe()
    ack_r, ack_w = os.pipe()
    if marked:
        names = ",".join(markers)
        pause = anchor if kill_after is not None and anchor is not None else ""
        argv = [sys.executable, "-c", MARK_SCRIPT, str(report_w), str(ack_r), pause, names]
    else:
        assert anchor is None, "an anchor needs the markers"
        argv = [sys.executable, "-m", "tillage"]
    reader = _Marks(report_r)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic_ns()
        # Output goes to files: a kill must never land on a process blocked on a full pipe.
        proc = subprocess.Popen(
            [*argv, *args],
            cwd=till.cwd,
            env=till.env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            pass_fds=(report_w, ack_r),
        )
        os.close(report_w)
        os.close(ack_r)
        try:
            _kill_when(
                reader,
                ack_w,
                lambda: proc.poll() is None,
                lambda: os.kill(proc.pid, signal.SIGKILL),
                anchor,
                kill_after,
            )
        finally:
            os.close(ack_w)  # a process paused at its anchor and not killed goes on
            returncode = proc.wait(timeout=120)
            end = time.monotonic_ns()
            marks = reader.drain()
            os.close(report_r)
        return Killed(returncode, marks, start, end, *_outputs(out, err))


def _outputs(out: IO[bytes], err: IO[bytes]) -> tuple[str, str]:
    out.seek(0)
    err.seek(0)
    return out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")


def _sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended just now
        os.kill(pid, signal.SIGKILL)


# A `till` that has imported every module of the package once and forks a fresh process for
# each command it is sent on the socket argv[1]: a JSON request {args, cwd, env, anchor,
# markers} with four descriptors (report, ack, stdout, stderr). It answers "pid N" once the
# process exists, and "exit S" (S as subprocess tells it: -9 for a SIGKILL) once it ended.
ZYGOTE_SCRIPT = _ARM_MARKERS + (
    "import importlib, json, os, pkgutil, socket, sys, traceback\n"
    "import tillage\n"
    "from tillage.hosts.cli.main import main\n"
    "for module in pkgutil.walk_packages(tillage.__path__, 'tillage.'):\n"
    "    if not module.name.endswith('__main__'):\n"
    "        importlib.import_module(module.name)\n"
    "channel = socket.socket(fileno=int(sys.argv[1]))\n"
    "while True:\n"
    "    message, fds, _flags, _address = socket.recv_fds(channel, 1 << 20, 4)\n"
    "    if not message:\n"
    "        break\n"
    "    request = json.loads(message)\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        code = 70\n"
    "        try:\n"
    "            channel.close()\n"
    "            os.dup2(fds[2], 1)\n"
    "            os.dup2(fds[3], 2)\n"
    "            os.chdir(request['cwd'])\n"
    "            os.environ.clear()\n"
    "            os.environ.update(request['env'])\n"
    "            marker = arm_markers(fds[0], fds[1], request['anchor'], request['markers'])\n"
    f"            marker({START_MARK!r})()\n"
    "            code = main(request['args'])\n"
    "        except SystemExit as exc:\n"
    "            code = exc.code if isinstance(exc.code, int) else 1\n"
    "        except BaseException:\n"
    "            traceback.print_exc()\n"
    "        finally:\n"
    "            sys.stdout.flush()\n"
    "            sys.stderr.flush()\n"
    "            os._exit(code)\n"
    "    for fd in fds:\n"
    "        os.close(fd)\n"
    "    channel.sendall(f'pid {pid}\\n'.encode())\n"
    "    status = os.waitpid(pid, 0)[1]\n"
    "    channel.sendall(f'exit {os.waitstatus_to_exitcode(status)}\\n'.encode())\n"
)


class Zygote:
    """Runs marked `till` commands as real processes, each forked from one process that has
    imported the whole package already: a kill campaign spends its time in the commands it
    kills, not in interpreter start-ups and compiling modules. Each command is a process of its
    own (its folder, environment and output its own), SIGKILLed like any other;
    `run_marked(marked=False)` still kills the real `python -m tillage`, start-up included."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self.channel = ours
        self.replies = b""
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE_SCRIPT, str(theirs.fileno())],
            env={k: v for k, v in os.environ.items() if not k.startswith("TILLAGE_")},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()

    def _running(self) -> bool:
        """False once the zygote said the command ended (it reaped it: its pid is free)."""
        while select.select([self.channel], [], [], 0)[0]:
            data = self.channel.recv(4096)
            if not data:
                break
            self.replies += data
        return b"exit" not in self.replies

    def _reply(self, word: str) -> int:
        while b"\n" not in self.replies:
            ready, _w, _x = select.select([self.channel], [], [], 120)
            data = self.channel.recv(4096) if ready else b""
            if not data:
                raise AssertionError(f"the zygote stopped answering (exit {self.process.poll()})")
            self.replies += data
        line, self.replies = self.replies.split(b"\n", 1)
        said, value = line.decode().split()
        assert said == word, (said, word)
        return int(value)

    def run(
        self,
        till: Till,
        args: Sequence[str],
        *,
        anchor: str | None = None,
        kill_after: float | None = None,
        markers: Sequence[str] = UNIVERSE_MARKERS,
    ) -> Killed:
        """As run_marked: runs `till ARGS` and SIGKILLs it `kill_after` seconds after it
        passes `anchor` (START_MARK: once `main` starts; None: once the process exists)."""
        report_r, report_w = os.pipe()
        ack_r, ack_w = os.pipe()
        reader = _Marks(report_r)
        pause = anchor if kill_after is not None and anchor is not None else ""
        request = {
            "args": list(args),
            "cwd": str(till.cwd),
            "env": till.env(),
            "anchor": pause,
            "markers": list(markers),
        }
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic_ns()
            socket.send_fds(
                self.channel,
                [json.dumps(request).encode()],
                [report_w, ack_r, out.fileno(), err.fileno()],
            )
            os.close(report_w)
            os.close(ack_r)
            pid = self._reply("pid")
            try:
                _kill_when(reader, ack_w, self._running, lambda: _sigkill(pid), anchor, kill_after)
            finally:
                os.close(ack_w)  # a process paused at its anchor and not killed goes on
                returncode = self._reply("exit")
                end = time.monotonic_ns()
                marks = reader.drain()
                os.close(report_r)
            return Killed(returncode, marks, start, end, *_outputs(out, err))

    def close(self) -> None:
        self.channel.close()  # the zygote reads an empty message and ends
        self.process.wait(timeout=30)


def published_snapshots(home: Path) -> list[str]:
    """Snapshot IDs whose log lines are whole, oldest first (a torn tail is not published)."""
    return [
        r.body["id"]
        for r in PublicationLog(log_path(home)).read_from(0, GENESIS)
        if r.kind == "snapshot"
    ]


def intent_files(home: Path) -> list[str]:
    """The interrupted rewinds' intent records in the store (temporary siblings aside)."""
    intents = home / "intents"
    if not intents.is_dir():
        return []
    return sorted(p.name for p in intents.iterdir() if TMP_MARK not in p.name)


def staging_leftovers(root: Path) -> list[str]:
    """Staging folders a rewind left under the workspace's `.tillage/`."""
    control = root / CONTROL_DIR
    if not control.is_dir() or control.is_symlink():
        return []
    return sorted(p.name for p in control.glob("staging-*"))


def pack_bytes(home: Path) -> int:
    """Bytes the store spends on object data: its packs and its scratch folder."""
    return sum(
        p.stat().st_size
        for folder in ("packs", "tmp")
        for p in (home / folder).rglob("*")
        if p.is_file()
    )


def verify_store(till: Till, *args: str) -> dict[str, Any]:
    """Runs `till verify`; its exit status must match its verdict (0 when ok, 1 when not)."""
    run = till("--json", "verify", *args)
    doc = run.doc
    assert "error" not in doc, doc
    assert run.code == (0 if doc["ok"] else 1), (run.code, doc)
    return dict(doc)


# -- holding a command at a failpoint ----------------------------------------------------------

# Runs the real command line and stops at the first pass of the failpoint argv[1]: it reports
# on the pipe argv[2] and waits until the test writes to (or closes) the pipe argv[3].
HOLD_SCRIPT = (
    "import os, sys\n"
    "from tillage.platform import failpoints\n"
    "held = []\n"
    "def hold():\n"
    "    if not held:\n"
    "        held.append(1)\n"
    "        os.write(int(sys.argv[2]), b'held\\n')\n"
    "        os.read(int(sys.argv[3]), 1)\n"
    "failpoints.arm(sys.argv[1], hold)\n"
    "from tillage.hosts.cli.main import main\n"
    "sys.exit(main(sys.argv[4:]))\n"
)


@dataclass
class Held:
    """A `till` process stopped at a failpoint; once let go, how it ended."""

    proc: subprocess.Popen[bytes]
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""


@contextmanager
def held(till: Till, failpoint: str, *args: str, timeout: float = 60.0) -> Iterator[Held]:
    """Runs `till ARGS` and yields once it stands at `failpoint` (holding whatever it holds
    there, e.g. a gc's maintenance lock); leaving the block lets it go on and waits for it."""
    report_r, report_w = os.pipe()
    ack_r, ack_w = os.pipe()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD_SCRIPT, failpoint, str(report_w), str(ack_r), *args],
            cwd=till.cwd,
            env=till.env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            pass_fds=(report_w, ack_r),
        )
        os.close(report_w)
        os.close(ack_r)
        run = Held(proc)
        try:
            ready, _w, _x = select.select([report_r], [], [], timeout)
            line = os.read(report_r, 100) if ready else b""
            if line != b"held\n":
                proc.kill()
                proc.wait(timeout=30)
                err.seek(0)
                raise AssertionError(
                    f"`till {' '.join(args)}` never stood at {failpoint}: "
                    + err.read().decode("utf-8", "replace")[-800:]
                )
            yield run
        finally:
            os.close(ack_w)  # it goes on
            run.returncode = proc.wait(timeout=120)
            os.close(report_r)
            out.seek(0)
            err.seek(0)
            run.stdout = out.read().decode("utf-8", "replace")
            run.stderr = err.read().decode("utf-8", "replace")


def has_open(pid: int, name: str) -> bool:
    """Tells whether process `pid` holds a descriptor on a file called `name` (e.g. a lock it
    is waiting to take)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").endswith(f"/{name}"):
                return True
        except OSError:
            continue
    return False
