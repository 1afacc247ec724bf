"""The recovery key never reaches a command tillage runs (issue 11, issue 23 item 1): a command
that walks every ancestor's /proc/PID/cmdline and /proc/PID/environ (as any process of the same
user may) and prints its own environment finds the key nowhere (nor the path of its file),
whether it was given as `--key HEX`, `--key-file PATH` or exported as TILLAGE_RECOVERY_KEY or
TILLAGE_RECOVERY_KEY_FILE, through every door that runs a command: `till
work` (and the result it pushes), `run`, `exec`, `try`, `bisect`, `merge --check`, `fork --
CMD`, and the MCP server's tools. Real processes throughout: /proc is what is at stake.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import Till
from tests.sync.conftest import Site, files_below

pytestmark = pytest.mark.process

# Walks from the command up to (not including) PID 1, appending each ancestor's argv and
# environment to $SPY_OUT and to stdout, then its own environment.
SPY = r"""out="${SPY_OUT:?}"
p=$$
while [ -n "$p" ] && [ "$p" -gt 1 ]; do
  { echo "== pid $p"; tr '\0' ' ' < "/proc/$p/cmdline"; echo; tr '\0' '\n' < "/proc/$p/environ"; } \
    > "$out.one" 2>/dev/null || break
  cat "$out.one" >> "$out"; cat "$out.one"
  p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)
done
rm -f "$out.one"
echo "== env" | tee -a "$out"; env | tee -a "$out"
[ ! -f state.txt ] || grep -qx ok state.txt
"""


def spy(tmp_path: Path) -> tuple[str, Path]:
    """The spying command (one word: run through /bin/sh -c) and the file it writes."""
    script = tmp_path / "spy.sh"
    script.write_text(SPY)
    return f"sh {script}", tmp_path / "spied.txt"


def key_of(till: Till, tmp_path: Path, folder: Path) -> tuple[Path, str]:
    """A folder remote holding `folder`'s workspace, pushed: (the remote, its key)."""
    (folder / "state.txt").write_text("ok\n")
    till.json("watch", "--no-daemon")
    remote = tmp_path / "remote"
    key = till.json("remote", "add", str(remote))["key"]
    till.json("sync", "--push")
    return remote, key


def assert_spied_without_key(spied: Path, key: str, *texts: str) -> None:
    """The spy ran, read a `till` ancestor's argv and environment, and found the key nowhere;
    nor is it in any of `texts` (what the door answered)."""
    seen = spied.read_text()
    blocks = seen.split("== pid ")[1:]
    tills = [b for b in blocks if "tillage" in b.splitlines()[1]]
    assert tills, "the spy saw no till ancestor"
    assert all("TILLAGE_HOME=" in b for b in tills), "the spy could not read a till's environ"
    assert key not in seen and key.upper() not in seen
    assert "secret-place" not in seen  # nor where a key file is
    own = seen.rsplit("== env", 1)[1]  # the command's own environment
    assert not re.search(r"^TILLAGE_RECOVERY_KEY\w*=", own, re.MULTILINE), own
    for text in texts:
        assert key not in text


def exported(key: str, tmp_path: Path) -> dict[str, str]:
    """Both variables a person may export: the key, and a file holding it."""
    path = tmp_path / "secret-place.tillage-key"
    path.write_text(key + "\n")
    path.chmod(0o600)
    return {"TILLAGE_RECOVERY_KEY": key, "TILLAGE_RECOVERY_KEY_FILE": str(path)}


HOW = ("--key", "TILLAGE_RECOVERY_KEY", "--key-file", "TILLAGE_RECOVERY_KEY_FILE")


def given(how: str, key: str, path: Path) -> tuple[list[str], dict[str, str]]:
    """The words or the environment that give `key` (or `path`, a file holding it) the way
    `how` names."""
    path.write_text(key + "\n")
    path.chmod(0o600)
    value = str(path) if how.startswith("--key-file") or how.endswith("_FILE") else key
    return ([how, value], {}) if how.startswith("--") else ([], {how: value})


@pytest.mark.parametrize("how", HOW)
def test_the_command_under_work_finds_the_key_in_no_ancestor_nor_the_pushed_result(
    how: str, tmp_path: Path, till: Till, folder: Path
) -> None:
    remote, key = key_of(till, tmp_path, folder)
    command, spied = spy(tmp_path)
    (tmp_path / "ci").mkdir()
    ci = Till(tmp_path / "store-ci", till.user_home, tmp_path / "ci", process=True)
    keyfile = tmp_path / "secret-place.tillage-key"
    words, env = given(how, key, keyfile)
    run = ci(
        "--json", "work", "--remote", str(remote), *words, "--result-ref", "spied",
        "--", f"{command} > seen.txt",
        env={**env, "SPY_OUT": str(spied)},
    )  # fmt: skip
    assert run.code == 0, run.stderr
    assert_spied_without_key(spied, key, run.stdout, run.stderr)

    # The result the command made (what it saw, sealed and pushed) holds no trace of it.
    out = ci.json("clone", str(remote), "out", "--ref", "spied", "--key-file", str(keyfile))
    files = files_below(Path(out["workspace"]))
    seen = files[str(Path(out["workspace"]) / "seen.txt")].decode()
    assert "TILLAGE_HOME=" in seen, "the spy's findings were pushed"
    assert all(key.encode() not in data for data in files.values())
    assert all(b"secret-place" not in data for data in files.values())


@pytest.mark.parametrize(
    "door",
    ["run", "exec", "try", "bisect", "merge --check", "fork -- CMD"],
)
def test_no_command_the_command_line_runs_finds_an_exported_key_or_its_file(
    door: str, tmp_path: Path, till: Till, folder: Path
) -> None:
    _remote, key = key_of(till, tmp_path, folder)
    command, spied = spy(tmp_path)
    env = {**exported(key, tmp_path), "SPY_OUT": str(spied)}
    if door == "merge --check":
        till.json("fork", "side")
        argv = ["merge", "side", "--check", command]
    elif door == "bisect":
        (folder / "state.txt").write_text("fail\n")
        till.json("snap")
        argv = ["bisect", "--", command]
    elif door == "fork -- CMD":
        argv = ["fork", "spied", "--", command]
    elif door == "run":
        argv = ["run", "spied", "--", command]
    else:
        argv = [door, "--", command]
    run = till("--json", *argv, env=env, process=True)
    assert run.code == 0, (run.stdout, run.stderr)
    assert_spied_without_key(spied, key, run.stdout, run.stderr)


@pytest.mark.anyio
async def test_no_tool_of_the_mcp_server_hands_a_command_the_servers_key_or_its_file(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    _remote, key = key_of(till, tmp_path, folder)
    command, spied = spy(tmp_path)
    till.json("fork", "side")
    (folder / "state.txt").write_text("fail\n")
    till.json("snap")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tillage", "--repo", str(folder), "mcp"],
        env={**till.env(), **exported(key, tmp_path), "SPY_OUT": str(spied)},
        cwd=str(folder),
    )
    calls = [
        ("workspace_run", {"name": "r", "command": command}),
        ("workspace_fork", {"name": "f", "command": command}),
        ("workspace_exec", {"command": command}),
        ("workspace_bisect", {"command": command}),
        ("workspace_merge", {"fork": "side", "check": command}),
        ("workspace_try", {"command": "sh " + str(tmp_path / "spy.sh") + "; true"}),
    ]
    async with Client(params) as client:
        for name, arguments in calls:
            spied.unlink(missing_ok=True)
            result = await client.call_tool(name, arguments)
            said = "\n".join(getattr(c, "text", "") for c in result.content)
            assert not result.is_error, (name, said)
            if name == "workspace_run":  # the command's output comes back, `env` and all
                assert "SPY_OUT=" in said, said
            assert_spied_without_key(spied, key, said, repr(result.structured_content))


def test_the_environment_a_served_call_forwards_holds_no_key() -> None:
    from tillage.hosts.cli.fast import forwarded_env

    env = {
        "TILLAGE_HOME": "/s",
        "TILLAGE_RECOVERY_KEY": "ab" * 32,
        "TILLAGE_RECOVERY_KEY_FILE": "/k",
        "TILLAGE_RECOVERY_KEY_FD": "3",
    }
    assert forwarded_env(env) == {"TILLAGE_HOME": "/s"}


def test_ssh_and_what_it_runs_never_get_the_key(
    tmp_path: Path, till: Till, folder: Path, ssh_site: Site
) -> None:
    """ssh runs what the user's config says (ProxyCommand, ...): it is started like a user's
    command, from a `till` that holds the key in neither argv nor environ."""
    (folder / "state.txt").write_text("ok\n")
    till.json("watch", "--no-daemon", env=ssh_site.env)
    key = till.json("remote", "add", ssh_site.url, env=ssh_site.env)["key"]
    till.json("sync", "--push", env=ssh_site.env)
    command, spied = spy(tmp_path)
    wrapper = tmp_path / "spy-ssh.sh"  # spies (its stdout is the protocol's: kept quiet), then ssh
    wrapper.write_text(f'{command} > /dev/null\nexec "$@"\n')
    env = {
        **ssh_site.env,
        "TILLAGE_SSH": f"sh {wrapper} {ssh_site.env['TILLAGE_SSH']}",
        "SPY_OUT": str(spied),
    }
    (tmp_path / "ci").mkdir()
    ci = Till(tmp_path / "store-ci", till.user_home, tmp_path / "ci", process=True)
    for words, extra in ((["--key", key], {}), ([], {"TILLAGE_RECOVERY_KEY": key})):
        spied.unlink(missing_ok=True)
        run = ci(
            "--json", "work", "--remote", ssh_site.url, *words, "--result-ref", "r", "--", "true",
            env={**env, **extra},
        )  # fmt: skip
        assert run.code == 0, run.stderr
        assert_spied_without_key(spied, key, run.stdout, run.stderr)


def test_a_verb_cannot_hand_a_command_the_key_through_its_own_variables(tmp_path: Path) -> None:
    """run_command's `env` adds to the environment, but never a variable naming the key."""
    from tillage.platform.commands import run_command
    from tillage.platform.launch import Launch

    out = run_command(
        ("env",),
        tmp_path,
        env={"TILLAGE_RECOVERY_KEY": "ab" * 32, "TILLAGE_RECOVERY_KEY_FD": "3", "MINE": "1"},
        launch=Launch(env={"PATH": "/usr/bin:/bin", "TILLAGE_RECOVERY_KEY_FILE": "/k"}),
    )
    assert "MINE=1" in out.output and "TILLAGE_RECOVERY_KEY" not in out.output


def _watcher_pid(till: Till) -> int | None:
    watcher = till.json("status").get("watcher") or {}
    pid = watcher.get("pid") if isinstance(watcher, dict) else None
    return pid if isinstance(pid, int) else None


def _holds(pid: int, secrets: tuple[str, ...]) -> list[str]:
    """Which of `secrets` process `pid` holds in its argv or environment."""
    seen = Path(f"/proc/{pid}/cmdline").read_bytes() + Path(f"/proc/{pid}/environ").read_bytes()
    return [s for s in secrets if s.encode() in seen]


def test_the_watcher_lives_on_without_the_key_in_the_foreground_or_not(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    """The watcher outlives the command line that started it, and a user's command can read
    any process of the same user: it holds neither the key nor its file's path."""
    import signal
    import subprocess
    import time

    _remote, key = key_of(till, tmp_path, folder)
    env = {**till.env(), **exported(key, tmp_path)}
    secrets = (key, "secret-place")

    def wait_watcher() -> int:
        deadline = time.monotonic() + 30
        while (pid := _watcher_pid(till)) is None:
            assert time.monotonic() < deadline, "no watcher"
            time.sleep(0.05)
        return pid

    started = till("--json", "watch", env=exported(key, tmp_path), process=True)
    assert started.code == 0, started.stderr
    try:
        assert _holds(wait_watcher(), secrets) == []
    finally:
        till.json("watch", "--stop")

    proc = subprocess.Popen(
        [sys.executable, "-m", "tillage", "--json", "watch", "--foreground"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_watcher() == proc.pid
        assert _holds(proc.pid, secrets) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
