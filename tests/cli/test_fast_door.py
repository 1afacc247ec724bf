"""The two doors of `till`: the whole command line in the process, or the watcher's socket.

Whichever door a call takes, the caller sees the same bytes and the same exit status; the
socket door is taken only in machine mode for the commands that benefit, and any trouble with
the watcher (none, a stale socket, a silent or broken one) gives the local answer promptly.
`run_served` (what the watcher runs) is compared byte for byte with a real process.

Which door a call took is observed with `python -X importtime`: the socket door never imports
the full command line (tillage.hosts.cli.main).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import Till
from tests.helpers import free_ports_above, make_project, process_gone

from tillage.core.paths import CONTROL_DIR
from tillage.hosts.cli import fast, where
from tillage.hosts.cli.main import NotServableError, run_served
from tillage.platform.identity import code_identity
from tillage.verbs.registry import COMMANDS, verb_for_command
from tillage.workspace import attach, watchstate

pytestmark = pytest.mark.process  # real `till` processes, daemons or servers

NOW = "2100-01-01T00:00:00Z"
SCRIPT = Path(sys.executable).with_name("till")
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="the till console script is missing")


def _env(till: Till) -> dict[str, str]:
    return {**till.env(), "TILLAGE_NOW": NOW}


def local(till: Till, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """The command line in its own process, in machine mode (no terminal anywhere)."""
    return subprocess.run(
        [sys.executable, "-m", "tillage", *args],
        cwd=cwd or till.cwd,
        env=_env(till),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )


def script(
    till: Till,
    *args: str,
    cwd: Path | None = None,
    importtime: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """The console script, as an agent runs it (stdin, stdout and stderr not terminals)."""
    pre = [sys.executable, "-X", "importtime", str(SCRIPT)] if importtime else [str(SCRIPT)]
    return subprocess.run(
        [*pre, *args],
        cwd=cwd or till.cwd,
        env={**_env(till), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )


def served(till: Till, *args: str, stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
    return run_served(list(args), str(till.cwd), _env(till), stdin)


def took_socket(run: subprocess.CompletedProcess[bytes]) -> bool:
    return b"tillage.hosts.cli.main" not in run.stderr


def without_importtime(stderr: bytes) -> bytes:
    return b"".join(
        line for line in stderr.splitlines(keepends=True) if not line.startswith(b"import time:")
    )


def same_store_size(doc: bytes) -> bytes:
    """`status` reports the store's bytes on disk, which moves between any two calls while a
    watcher holds the index open (its write-ahead log), and the disk's free space: compared
    without them."""
    doc = re.sub(rb'"(store_bytes|filesystem_free_bytes)":\d+', rb'"\1":0', doc)
    doc = re.sub(rb"Budget +[^\n]*", b"Budget", doc)  # the disk's free space moves too
    return re.sub(rb'"bytes":\d+\}', b'"bytes":0}', re.sub(rb"Store +\S+ \S+", b"Store", doc))


def sealed_anew(doc: bytes) -> bytes:
    """A seal's answer without what makes each seal its own: IDs and times."""
    doc = re.sub(rb"[0-9a-f]{12,64}", b"ID", doc)
    doc = re.sub(rb'"sealed_at":"[^"]*"', b'"sealed_at":""', doc)
    return re.sub(rb"just now|\d+ s ago|\d+ min ago", b"AGO", doc)


@pytest.fixture
def project(till: Till, folder: Path) -> dict[str, Any]:
    make_project(folder)
    first: dict[str, Any] = till.json("watch", "--no-daemon")["head"]
    (folder / "README.md").write_text("# changed\n")
    second: dict[str, Any] = till.json("snap", "-m", "second")["snapshot"]
    return {"first": first["id"], "second": second["id"]}


# -- run_served is the command line, byte for byte ---------------------------------------------


def _same(till: Till, *args: str) -> None:
    proc = local(till, *args)
    code, out, err = served(till, *args)
    assert (code, out, err) == (proc.returncode, proc.stdout, proc.stderr), args


def test_run_served_prints_what_a_process_prints(till: Till, project: dict[str, Any]) -> None:
    first = project["first"]
    for args in (
        ["--json", "timeline"],
        ["timeline"],
        ["--json", "show", first],
        ["show", first[:8]],
        ["--json", "diff", first],
        ["diff", first],
        ["--json", "show", "abcdef12"],  # not_found: exit 1, the envelope on stdout
        ["show", "abcdef12"],  # not_found: one line on stderr
        ["--json", "status", "--no-such-flag"],  # usage: exit 2
        ["timeline", "--bogus"],
        ["--json", "rewind", first],  # confirmation_required in machine mode
        ["--help"],
        ["show", "--help"],
    ):
        _same(till, *args)
    proc = local(till, "--json", "status")
    code, out, err = served(till, "--json", "status")
    assert (code, same_store_size(out), err) == (0, same_store_size(proc.stdout), proc.stderr)
    for args in (["--json", "snap", "-m", "x"], ["snap", "-m", "x"]):
        # Each snap seals anew (its own ID, time and parent): the rest is the same.
        proc = local(till, *args)
        code, out, err = served(till, *args)
        assert (code, sealed_anew(out), err) == (0, sealed_anew(proc.stdout), proc.stderr)


def test_run_served_resolves_repo_and_the_store_against_the_callers_folder_and_env(
    till: Till, project: dict[str, Any], folder: Path
) -> None:
    env = {**_env(till), "TILLAGE_HOME": os.path.relpath(till.home, folder.parent)}
    code, out, _ = run_served(
        ["--json", "--repo", folder.name, "timeline"], str(folder.parent), env, None
    )
    assert code == 0
    assert [s["id"] for s in json.loads(out)["snapshots"]] == [project["second"], project["first"]]


def test_run_served_answers_errors_in_its_own_streams(till: Till) -> None:
    code, out, err = served(till, "--json", "status")
    assert code == 1 and json.loads(out)["error"]["name"] == "workspace.not_attached"
    assert err == b""


def test_run_served_calls_in_threads_do_not_mix(till: Till, project: dict[str, Any]) -> None:
    expected = {
        "timeline": served(till, "--json", "timeline"),
        "show": served(till, "--json", "show", project["first"]),
        "missing": served(till, "--json", "show", "abcdef12"),
    }
    results: list[tuple[str, tuple[int, bytes, bytes]]] = []

    def call(name: str, args: list[str]) -> None:
        for _ in range(5):
            results.append((name, served(till, *args)))

    threads = [
        threading.Thread(target=call, args=("timeline", ["--json", "timeline"])),
        threading.Thread(target=call, args=("show", ["--json", "show", project["first"]])),
        threading.Thread(target=call, args=("missing", ["--json", "show", "abcdef12"])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 15
    for name, got in results:
        assert got == expected[name], name


# -- the console script's door ------------------------------------------------------------------


def test_the_lean_rules_agree_with_the_modules_they_stand_in_for(tmp_path: Path) -> None:
    assert where.CONTROL_DIR == CONTROL_DIR
    assert where.POINTER == attach.POINTER
    assert where.socket_path(str(tmp_path), "ab12") == str(watchstate.socket_path(tmp_path, "ab12"))
    assert set(COMMANDS) >= fast.SOCKET_COMMANDS
    assert {c.partition(" ")[0] for c in COMMANDS if " " in c} == fast.GROUPS
    reads_stdin = set()
    for command in fast.SOCKET_COMMANDS:
        verb = verb_for_command(command)
        if verb is not None and verb.contract.stdin_param is not None:
            reads_stdin.add(command)
    assert reads_stdin <= fast.STDIN_COMMANDS
    if verb_for_command("hook") is not None:
        assert reads_stdin == fast.STDIN_COMMANDS


def test_the_store_is_found_as_the_command_line_finds_it(tmp_path: Path) -> None:
    home = str(tmp_path)
    assert where.store_home({"TILLAGE_HOME": "~/s/./t/", "HOME": home}, "/x") == f"{home}/s/t"
    assert where.store_home({"TILLAGE_HOME": "rel"}, "/work") == "/work/rel"
    assert where.store_home({"XDG_DATA_HOME": "/d"}, "/") == "/d/tillage"
    assert where.store_home({"HOME": home}, "/") == f"{home}/.local/share/tillage"


def test_the_workspace_pointer_is_never_followed_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / CONTROL_DIR).mkdir(parents=True)
    (real / CONTROL_DIR / "workspace.json").write_text(json.dumps({"workspace": "ab" * 16}))
    (real / "sub").mkdir()
    assert where.workspace_id(str(real / "sub")) == "ab" * 16
    other = tmp_path / "other"
    other.mkdir()
    (other / CONTROL_DIR).symlink_to(real / CONTROL_DIR)
    assert where.workspace_id(str(other)) is None


class FakeWatcher:
    """A socket where a workspace's watcher would listen, answering as told: to show that a
    watcher that is silent, broken or odd never changes the answer or hangs the call."""

    def __init__(self, path: Path, answer: Callable[[dict[str, Any]], bytes | None]) -> None:
        self.path = path
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
        try:  # pytest's folders are longer than a socket path may be: bind by descriptor
            self.server.bind(f"/proc/self/fd/{folder}/{path.name}")
        finally:
            os.close(folder)
        self.server.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            for line in reader:
                request = json.loads(line)
                self.requests.append(request)
                reply = self.answer(request)
                if reply is None:
                    time.sleep(30)  # silent: the caller must not wait for this
                    return
                if not reply:
                    return  # hang up without a word
                conn.sendall(reply)

    def close(self) -> None:
        self.server.close()
        self.path.unlink(missing_ok=True)


def _reply(request: dict[str, Any], result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n"


@pytest.fixture
def fake_watcher(
    till: Till, project: dict[str, Any], folder: Path
) -> Iterator[Callable[..., FakeWatcher]]:
    workspace_id = where.workspace_id(str(folder))
    assert workspace_id is not None
    made: list[FakeWatcher] = []

    def make(answer: Callable[[dict[str, Any]], bytes | None]) -> FakeWatcher:
        path = Path(where.socket_path(str(till.home), workspace_id))
        watcher = FakeWatcher(path, answer)
        made.append(watcher)
        return watcher

    yield make
    for w in made:
        w.close()


@needs_script
def test_a_served_answer_is_printed_as_sent(
    till: Till, fake_watcher: Callable[..., FakeWatcher]
) -> None:
    def answer(request: dict[str, Any]) -> bytes:
        if request["method"] == "tillage.ping":
            return _reply(request, {"id": "x", "code": code_identity()})
        return _reply(request, {"exit": 3, "stdout_b64": "b3V0Cg==", "stderr_b64": "ZXJyCg=="})

    watcher = fake_watcher(answer)
    run = script(till, "--json", "timeline")
    assert (run.returncode, run.stdout, run.stderr) == (3, b"out\n", b"err\n")
    cli = watcher.requests[-1]
    assert cli["method"] == "tillage.cli"
    assert cli["params"]["argv"] == ["--json", "timeline"]
    assert cli["params"]["cwd"] == str(till.cwd)
    assert cli["params"]["stdin_b64"] is None  # timeline does not read stdin
    assert cli["params"]["env"]["TILLAGE_HOME"] == str(till.home)
    assert cli["params"]["env"]["TILLAGE_NOW"] == NOW
    assert "PATH" not in cli["params"]["env"]


@needs_script
@pytest.mark.parametrize(
    "kind",
    ["garbage", "error", "wrong_id", "closes", "bad_result", "silent_ping", "other_install"],
)
def test_a_watcher_in_trouble_gives_the_local_answer_promptly(
    till: Till, fake_watcher: Callable[..., FakeWatcher], kind: str
) -> None:
    def answer(request: dict[str, Any]) -> bytes | None:
        if request["method"] == "tillage.ping":
            if kind == "silent_ping":
                return None
            # A watcher started by another install (an upgrade) must not answer for this one.
            code = "0.0.1@/elsewhere/tillage" if kind == "other_install" else code_identity()
            return _reply(request, {"id": "x", "code": code})
        if kind == "other_install":
            return _reply(request, {"exit": 0, "stdout_b64": "b2xkCg==", "stderr_b64": ""})
        return {
            "garbage": b"{not json\n",
            "error": json.dumps(
                {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "x"}}
            ).encode()
            + b"\n",
            "wrong_id": _reply({"id": 99}, {"exit": 0, "stdout_b64": "", "stderr_b64": ""}),
            "closes": b"",
            "bad_result": _reply(request, {"exit": "zero", "stdout_b64": 1}),
        }[kind]

    expected = local(till, "--json", "timeline")
    fake_watcher(answer)
    started = time.monotonic()
    run = script(till, "--json", "timeline")
    assert time.monotonic() - started < 10
    assert (run.returncode, run.stdout, run.stderr) == (
        expected.returncode,
        expected.stdout,
        expected.stderr,
    )


@needs_script
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_while_the_watcher_works_prints_the_interrupted_envelope(
    till: Till, fake_watcher: Callable[..., FakeWatcher], sig: int, status: int
) -> None:
    asked = threading.Event()

    def answer(request: dict[str, Any]) -> bytes | None:
        if request["method"] == "tillage.ping":
            return _reply(request, {"id": "x", "code": code_identity()})
        asked.set()
        return None

    fake_watcher(answer)
    with subprocess.Popen(
        [str(SCRIPT), "--json", "timeline"],
        cwd=till.cwd,
        env=_env(till),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert asked.wait(20), "the command never reached the watcher"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == status
    assert json.loads(out)["error"]["name"] == "interrupted"
    assert b"interrupted" in err or b"terminated" in err


@needs_script
def test_a_terminal_takes_the_local_door(
    till: Till, fake_watcher: Callable[..., FakeWatcher]
) -> None:
    watcher = fake_watcher(lambda r: _reply(r, {"id": "x"}))
    primary, secondary = pty.openpty()
    try:
        run = subprocess.run(
            [str(SCRIPT), "--json", "timeline"],
            cwd=till.cwd,
            env=_env(till),
            stdin=secondary,
            capture_output=True,
            timeout=60,
        )
    finally:
        os.close(primary)
        os.close(secondary)
    assert run.returncode == 0
    assert watcher.requests == []


@needs_script
def test_commands_outside_the_list_take_the_local_door(
    till: Till, fake_watcher: Callable[..., FakeWatcher]
) -> None:
    watcher = fake_watcher(lambda r: _reply(r, {"id": "x"}))
    for args in (["--json", "version"], ["--json", "verify"], ["--debug", "--json", "timeline"]):
        script(till, *args)
    assert watcher.requests == []


@needs_script
def test_session_commands_an_agent_repeats_go_through_the_watcher(
    till: Till, fake_watcher: Callable[..., FakeWatcher]
) -> None:
    def answer(request: dict[str, Any]) -> bytes:
        if request["method"] == "tillage.ping":
            return _reply(request, {"id": "x", "code": code_identity()})
        return _reply(request, {"exit": 0, "stdout_b64": "e30K", "stderr_b64": ""})

    watcher = fake_watcher(answer)
    for args in (["session", "record", "s-1"], ["sessions"], ["session", "log", "s-1"]):
        run = script(till, "--json", *args)
        assert (run.returncode, run.stdout) == (0, b"{}\n"), args
        assert watcher.requests[-1]["params"]["argv"] == ["--json", *args]
    served = len(watcher.requests)
    for args in (["session", "revert", "abcdef"], ["session", "cleanup"], ["session"]):
        script(till, "--json", *args)
    assert len(watcher.requests) == served, "destructive or odd session calls run here"


# -- against the real watcher ------------------------------------------------------------------


def _watcher_available() -> bool:
    try:
        import tillage.hosts.daemon.main  # noqa: F401
    except ImportError:
        return False
    return True


needs_watcher = pytest.mark.skipif(
    not (_watcher_available() and SCRIPT.exists()), reason="the watcher daemon is not built yet"
)


@pytest.fixture
def watched(till: Till, project: dict[str, Any]) -> Iterator[dict[str, Any]]:
    doc = till.json("watch")
    assert doc["watching"] is True
    status = till.json("status")
    yield {**project, "pid": status["watcher"]["pid"]}
    till("watch", "--stop")


@needs_watcher
def test_through_the_watcher_the_bytes_and_status_are_the_local_ones(
    till: Till, watched: dict[str, Any]
) -> None:
    first = watched["first"]
    cases = (
        ["--json", "timeline"],
        ["timeline"],
        ["--json", "show", first],
        ["diff", first],
        ["--json", "show", "abcdef12"],
        ["show", "abcdef12"],
        ["--json", "timeline", "--bogus"],
        ["--json", "rewind", first],
    )
    for args in cases:
        through = script(till, *args, importtime=True)
        assert took_socket(through), args
        here = local(till, *args)
        assert (through.returncode, through.stdout, without_importtime(through.stderr)) == (
            here.returncode,
            here.stdout,
            here.stderr,
        ), args
    through = script(till, "--json", "status", importtime=True)
    assert took_socket(through)
    here = local(till, "--json", "status")
    assert same_store_size(through.stdout) == same_store_size(here.stdout)
    assert json.loads(through.stdout)["watching"] is True


@needs_watcher
def test_a_snap_through_the_watcher_lands_in_the_timeline(
    till: Till, watched: dict[str, Any], folder: Path
) -> None:
    (folder / "new.txt").write_text("new")
    run = script(till, "--json", "snap", "-m", "through", importtime=True)
    assert took_socket(run) and run.returncode == 0, run.stderr[-2000:]
    snap = json.loads(run.stdout)["snapshot"]
    newest = till.json("timeline")["snapshots"][0]
    assert newest["id"] == snap["id"] and newest["label"] == "through"


@needs_watcher
def test_a_stale_socket_gives_the_local_answer_promptly(
    till: Till, watched: dict[str, Any]
) -> None:
    os.kill(watched["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 20
    while not process_gone(watched["pid"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    run = script(till, "--json", "timeline")
    assert time.monotonic() - started < 10
    here = local(till, "--json", "timeline")
    assert (run.returncode, run.stdout, run.stderr) == (here.returncode, here.stdout, here.stderr)
    status = script(till, "--json", "status")
    assert json.loads(status.stdout)["watching"] is False


needs_hook = pytest.mark.skipif(
    verb_for_command("hook") is None, reason="the `hook` verb is not registered yet"
)


@needs_watcher
@needs_hook
def test_a_hook_through_the_watcher_reads_the_harness_payload_and_never_exits_2(
    till: Till, watched: dict[str, Any], folder: Path
) -> None:
    payload = {"session_id": "s-1", "hook_event_name": "PostToolUse", "tool_name": "Edit"}
    (folder / "edited.txt").write_text("by the agent")
    run = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), "--json", "hook", "post-tool"],
        cwd=folder,
        env=_env(till),
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
    )
    assert took_socket(run) and run.returncode == 0, run.stderr[-2000:]
    doc = json.loads(run.stdout)
    assert doc["snapshot"]["session"] == "s-1"
    assert doc["snapshot"]["trigger"] == "hook"
    bad = script(till, "--json", "hook", "post-tool", "--no-such-flag", importtime=True)
    assert took_socket(bad)
    assert bad.returncode == 1 and json.loads(bad.stdout)["error"]["name"] == "usage"


def _imported(stderr: bytes) -> set[str]:
    """The modules `python -X importtime` says were imported."""
    return {
        line.rsplit(b"|", 1)[1].strip().decode()
        for line in stderr.splitlines()
        if line.startswith(b"import time:") and b"|" in line
    }


@needs_watcher
@needs_hook
def test_a_hook_through_the_watcher_imports_only_the_doors_few_modules(
    till: Till, watched: dict[str, Any], folder: Path
) -> None:
    """A hook runs after every tool call of an agent: its process imports what the door needs
    and nothing with a start-up cost of its own (dataclasses and typing cost more than the
    whole round trip to the watcher)."""
    payload = {"session_id": "s-1", "hook_event_name": "Stop", "stop_hook_active": False}
    run = subprocess.run(
        [sys.executable, "-X", "importtime", str(SCRIPT), "hook", "turn-end"],
        cwd=folder,
        env=_env(till),
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
    )
    assert run.returncode == 0 and took_socket(run), run.stderr[-2000:]
    imported = _imported(run.stderr)
    assert "tillage.hosts.cli.fast" in imported
    assert not imported & {"dataclasses", "typing", "json", "socket", "inspect", "re"}, imported


def test_the_door_keeps_every_secret_variable_from_the_watcher() -> None:
    from tillage.platform.launch import SECRET_VARIABLES, is_secret

    names = [*SECRET_VARIABLES, "TILLAGE_RECOVERY_KEY_OTHER", "TILLAGE_HOME", "TILLAGE_AGENT"]
    sent = fast.forwarded_env(dict.fromkeys(names, "x"))
    assert set(sent) == {n for n in names if not is_secret(n)} == {"TILLAGE_HOME", "TILLAGE_AGENT"}


def test_run_served_refuses_a_caller_in_another_time_zone(till: Till) -> None:
    # Local times are process-wide (TZ): the watcher cannot print another zone's, so it
    # answers an error and the console script runs the command itself.
    other = "UTC0" if os.environ.get("TZ") != "UTC0" else "EST5"
    with pytest.raises(NotServableError):
        run_served(["--json", "timeline"], str(till.cwd), {**_env(till), "TZ": other}, None)


@needs_watcher
def test_concurrent_calls_through_the_watcher_each_get_their_own_answer(
    till: Till, watched: dict[str, Any]
) -> None:
    cases = [["--json", "timeline"], ["--json", "show", watched["first"]], ["show", "abcdef12"]]
    expected = [local(till, *args) for args in cases]
    procs = [
        (
            n,
            subprocess.Popen(
                [str(SCRIPT), *cases[n % 3]],
                cwd=till.cwd,
                env=_env(till),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            ),
        )
        for n in range(12)
    ]
    for n, proc in procs:
        out, err = proc.communicate(timeout=60)
        want = expected[n % 3]
        assert (proc.returncode, out, err) == (want.returncode, want.stdout, want.stderr)


def test_a_served_call_leaves_no_store_open_in_the_serving_process(
    till: Till, project: dict[str, Any], folder: Path
) -> None:
    """The watcher lives on after each call: an index left open would keep its WAL growing
    and its descriptors held until a garbage-collection pass."""

    def open_index_fds() -> list[str]:
        found = []
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.startswith(str(till.home)):
                    found.append(target)
        return found

    gc.collect()
    before = open_index_fds()
    (folder / "served.txt").write_text("x\n")
    for argv in (["--json", "status"], ["--json", "snap"], ["--json", "timeline"]):
        code, _out, _err = run_served(argv, str(folder), till.env(), None)
        assert code == 0
    assert open_index_fds() == before  # no gc.collect() in between: closed, not collected


@needs_watcher
def test_a_fork_through_the_watcher_is_the_fork_a_local_call_makes(
    till: Till, watched: dict[str, Any], folder: Path
) -> None:
    (folder / "new.txt").write_text("made just before the fork")
    through = script(till, "--json", "fork", "served", importtime=True)
    assert took_socket(through) and through.returncode == 0, through.stderr[-2000:]
    fork = json.loads(through.stdout)["fork"]
    assert Path(fork["path"], "new.txt").read_text() == "made just before the fork"
    here = local(till, "--json", "fork", "here")
    local_fork = json.loads(here.stdout)["fork"]
    assert fork["base"] == local_fork["base"]  # the same live state, sealed once
    assert sorted(fork) == sorted(local_fork)
    # A fork that runs a command runs it here, never inside the watcher.
    ran = script(till, "--json", "fork", "ran", "--", "true", importtime=True)
    assert not took_socket(ran) and ran.returncode == 0, ran.stderr[-2000:]


@needs_watcher
def test_a_fork_through_the_watcher_counts_its_port_from_the_callers_port(
    till: Till, watched: dict[str, Any]
) -> None:
    """The watcher runs the command line for the caller: it must see the caller's $PORT."""
    base = free_ports_above(1)
    through = script(till, "--json", "fork", "p", importtime=True, env={"PORT": str(base)})
    assert took_socket(through) and through.returncode == 0, through.stderr[-2000:]
    assert json.loads(through.stdout)["fork"]["port"] == base + 1
    bad = script(till, "--json", "fork", "q", importtime=True, env={"PORT": "nope"})
    assert took_socket(bad) and bad.returncode == 1
    assert json.loads(bad.stdout)["error"]["name"] == "fork.bad_port"
