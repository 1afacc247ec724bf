"""The recovery key given without argv or the environment: a key file (`--key-file`,
TILLAGE_RECOVERY_KEY_FILE) that must be private, a prompt at a terminal, one order of
precedence for every verb that takes a key, and `remote add` writing a key it generates to a
file instead of a screen. Every command tillage prints names the file, never the key."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tillage.agent
from tests.conftest import Till

HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def published(tmp_path: Path, till: Till, folder: Path) -> tuple[Path, str]:
    """A workspace pushed to a folder remote: (the remote, its key)."""
    (folder / "src.txt").write_text("source\n")
    till.json("watch", "--no-daemon")
    remote = tmp_path / "remote"
    key = till.json("remote", "add", str(remote))["key"]
    till.json("sync", "--push")
    return remote, key


def key_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def other(tmp_path: Path, till: Till) -> Till:
    """Another machine: a store of its own, in a folder that is no workspace."""
    (tmp_path / "b").mkdir(exist_ok=True)
    return Till(tmp_path / "store-b", till.user_home, tmp_path / "b")


def error_of(run: object) -> dict[str, str]:
    doc = getattr(run, "doc")  # noqa: B009
    assert getattr(run, "code") == 1, doc  # noqa: B009
    return doc["error"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660], ids=lambda m: f"{m:04o}")
def test_a_key_file_others_could_read_is_refused_with_the_chmod_that_fixes_it(
    mode: int, tmp_path: Path, till: Till, folder: Path
) -> None:
    remote, key = published(tmp_path, till, folder)
    b = other(tmp_path, till)
    path = key_file(tmp_path / "the key", key + "\n", mode)
    err = error_of(b("--json", "clone", str(remote), "out", "--key-file", str(path)))
    assert (err["code"], err["name"]) == (-32305, "sync.key_file_unsafe")
    assert f"{mode:04o}" in err["message"] and key not in str(err)
    assert err["next"] == f"chmod 600 '{path}'"
    assert not (tmp_path / "b" / "out").exists(), "nothing was made"

    path.chmod(0o600)  # what the next step says, and it works
    out = b.json("clone", str(remote), "out", "--key-file", str(path))
    assert (Path(out["workspace"]) / "src.txt").read_text() == "source\n"


def test_a_private_key_file_works_by_flag_and_by_variable_read_only_too(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    remote, key = published(tmp_path, till, folder)
    b = other(tmp_path, till)
    path = key_file(tmp_path / "k", f"  {key.upper()}\n\n", 0o400)  # blanks and case forgiven
    b.json("clone", str(remote), "one", "--key-file", str(path))
    b.json("clone", str(remote), "two", env={"TILLAGE_RECOVERY_KEY_FILE": str(path)})
    home = b.user_home / "project.tillage-key"  # `~` is the caller's home
    key_file(home, key)
    b.json("clone", str(remote), "three", "--key-file", "~/project.tillage-key")
    for name in ("one", "two", "three"):
        assert (tmp_path / "b" / name / "src.txt").read_text() == "source\n"


def test_a_missing_unreadable_or_wrong_key_file_is_a_clear_error_that_never_echoes(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    remote, key = published(tmp_path, till, folder)
    b = other(tmp_path, till)
    gone = tmp_path / "nowhere.key"
    err = error_of(b("--json", "clone", str(remote), "out", "--key-file", str(gone)))
    assert (err["code"], err["name"]) == (-32306, "sync.key_file_missing")
    assert str(gone) in err["message"] and "--key-file" in err["next"]
    err = error_of(b("--json", "clone", str(remote), "out", env={"TILLAGE_RECOVERY_KEY_FILE": ""}))
    assert err["name"] == "sync.bad_key"  # an empty variable names nothing
    err = error_of(b("--json", "clone", str(remote), "out", "--key-file", ""))
    assert err["name"] == "invalid_argument" and "--key-file PATH" in err["next"]

    folder_key = tmp_path / "dir.key"
    folder_key.mkdir(mode=0o700)
    err = error_of(b("--json", "clone", str(remote), "out", "--key-file", str(folder_key)))
    assert err["name"] == "sync.key_file_unsafe" and "not a regular file" in err["message"]

    near = key[:-1] + "z"  # almost the key: never repeated
    bad = key_file(tmp_path / "bad.key", near)
    err = error_of(b("--json", "clone", str(remote), "out", "--key-file", str(bad)))
    assert err["name"] == "sync.bad_key" and near not in str(err) and key[:20] not in str(err)
    assert not (tmp_path / "b" / "out").exists()


def test_the_order_is_key_then_key_file_then_its_variable_then_the_key_variable(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    remote, key = published(tmp_path, till, folder)
    b = other(tmp_path, till)
    wrong = "cd" * 32
    good = key_file(tmp_path / "good.key", key)
    bad = key_file(tmp_path / "bad.key", wrong)
    url = str(remote)
    cases = [
        # (words, environment): the first way in the order holds the good key
        (["--key", key], {"TILLAGE_RECOVERY_KEY_FILE": str(bad), "TILLAGE_RECOVERY_KEY": wrong}),
        (["--key-file", str(good)], {"TILLAGE_RECOVERY_KEY_FILE": str(bad)}),
        (["--key-file", str(good)], {"TILLAGE_RECOVERY_KEY": wrong}),
        ([], {"TILLAGE_RECOVERY_KEY_FILE": str(good), "TILLAGE_RECOVERY_KEY": wrong}),
        ([], {"TILLAGE_RECOVERY_KEY": key}),
    ]
    for n, (words, env) in enumerate(cases):
        for process in (False, True):  # in a process, the key is handed over to itself
            dest = f"c{n}{'p' if process else ''}"
            run = b("--json", "clone", url, dest, *words, env=env, process=process)
            assert run.code == 0, (words, env, process, run.stdout)

    # The second way each time holds the good key: the first, wrong, one is what was used.
    for words, env in [
        (["--key", wrong], {"TILLAGE_RECOVERY_KEY": key}),
        ([], {"TILLAGE_RECOVERY_KEY_FILE": str(bad), "TILLAGE_RECOVERY_KEY": key}),
    ]:
        for process in (False, True):
            run = b("--json", "clone", url, "nope", *words, env=env, process=process)
            assert run.code == 1 and run.doc["error"]["name"] == "integrity", run.stdout

    both = b("--json", "clone", url, "nope", "--key", key, "--key-file", str(good))
    err = error_of(both)
    assert err["name"] == "invalid_argument" and "not both" in err["message"]
    assert not (tmp_path / "b" / "nope").exists()


def test_without_a_key_machine_mode_says_how_to_give_one_never_as_argv(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    remote, _key = published(tmp_path, till, folder)
    b = other(tmp_path, till)
    for argv in (
        ["clone", str(remote), "out"],
        ["work", "--remote", str(remote), "--result-ref", "r", "--", "true"],
    ):
        err = error_of(b("--json", *argv, process=True))
        assert err["name"] == "sync.bad_key" and "needs the remote's recovery key" in err["message"]
        assert "--key-file PATH" in err["next"] and "--key HEX" not in err["next"]


def _in_a_terminal(argv: list[str], env: dict[str, str], cwd: Path, typed: str) -> tuple[int, str]:
    """Runs `argv` with stdin, stdout and stderr a terminal (a pty); types `typed` once the
    prompt shows. Returns the exit status and everything the terminal showed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    shown, sent = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break  # the child closed the terminal
                if not chunk:
                    break
                shown += chunk
            if not sent and b"Recovery key" in shown:
                os.write(fd, typed.encode() + b"\n")
                sent = True
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown.decode("utf-8", "replace")


@pytest.mark.process
def test_at_a_terminal_the_key_is_asked_for_and_never_echoed(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    remote, key = published(tmp_path, till, folder)
    b = other(tmp_path, till)
    argv = [sys.executable, "-m", "tillage", "clone", str(remote), "out"]
    code, shown = _in_a_terminal(argv, b.env(), tmp_path / "b", key)
    assert code == 0, shown
    assert "Recovery key for a clone" in shown and key not in shown
    assert (tmp_path / "b" / "out" / "src.txt").read_text() == "source\n"

    # Nothing typed (end of input): the same clear error as machine mode.
    code, shown = _in_a_terminal([*argv[:-1], "out2"], b.env(), tmp_path / "b", "")
    assert code == 1 and "sync.bad_key" in shown
    assert not (tmp_path / "b" / "out2").exists()


def test_remote_add_writes_a_new_key_to_the_key_file_and_the_other_machine_reads_it(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    (folder / "src.txt").write_text("source\n")
    till.json("watch", "--no-daemon")
    remote = tmp_path / "remote"
    path = tmp_path / "project.tillage-key"
    added = till.json("remote", "add", str(remote), "--key-file", str(path))
    assert "key" not in added and added["key_file"] == str(path)
    assert path.stat().st_mode & 0o777 == 0o600
    key = path.read_text().strip()
    assert HEX64.fullmatch(key)
    till.json("sync", "--push")

    b = other(tmp_path, till)
    out = b.json("clone", str(remote), "out", "--key-file", str(path))
    assert (Path(out["workspace"]) / "src.txt").read_text() == "source\n"

    # A third machine adds the same remote from the same file: the key is read, not replaced.
    (tmp_path / "third").mkdir()
    third = Till(tmp_path / "store-c", till.user_home, tmp_path / "third")
    third.json("watch", "--no-daemon")
    again = third.json("remote", "add", str(remote), "--key-file", str(path))
    assert "key" not in again and "key_file" not in again
    assert path.read_text().strip() == key

    # A new key file for a place that holds a remote already: refused (the place is taken by
    # a remote of another key), and the file it wrote (whose key opens nothing) is gone again.
    fresh = tmp_path / "fresh.tillage-key"
    err = error_of(third("--json", "remote", "add", str(remote), "--name", "x", "--key-file",
                         str(fresh)))  # fmt: skip
    assert err["name"] == "sync.remote_occupied" and "--key-file PATH" in err["next"]
    assert not fresh.exists()


def test_remote_add_without_a_key_file_keeps_the_new_key_in_a_private_file_of_the_store(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    till.json("watch", "--no-daemon")
    added = till.json("remote", "add", str(tmp_path / "remote"))
    written = Path(added["key_file"])
    assert written.parent == till.home / "keys"
    assert written.stat().st_mode & 0o777 == 0o600
    assert written.read_text().strip() == added["key"]  # `key`: the contract's, for a caller


@pytest.mark.process
def test_remote_adds_page_never_shows_the_key_and_its_next_command_works_as_printed(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    (folder / "src.txt").write_text("source\n")
    till.json("watch", "--no-daemon")
    remote = tmp_path / "remote"
    page = till("remote", "add", str(remote), process=True)
    assert page.code == 0, page.stderr
    assert not HEX64.search(page.stdout + page.stderr), page.stdout
    till.json("sync", "--push")
    printed = [ln.strip() for ln in page.stdout.splitlines() if ln.strip().startswith("till ")]
    assert printed and "--key-file" in printed[-1], page.stdout

    b = other(tmp_path, till)
    ran = subprocess.run(
        ["sh", "-c", printed[-1]], cwd=tmp_path / "b", env=b.env(), capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    # The clone it prints makes a folder named as this one (not as the remote's folder).
    assert (tmp_path / "b" / folder.name / "src.txt").read_text() == "source\n"


def test_a_key_file_that_cannot_be_written_adds_no_remote(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    till.json("watch", "--no-daemon")
    remote = tmp_path / "remote"
    err = error_of(till("--json", "remote", "add", str(remote), "--key-file", "/nonexistent/k"))
    assert (err["code"], err["name"]) == (-32307, "sync.key_file_taken")
    assert till.json("remote", "list")["remotes"] == [] and not remote.exists()


@pytest.mark.process
def test_the_offers_commands_run_as_printed_carry_the_key_as_a_file(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    (folder / "src.txt").write_text("source\n")
    till.json("watch", "--no-daemon")
    ws = tillage.agent.open_workspace(folder, home=till.home)
    assert ws is not None
    offer = ws.offer_sync(str(tmp_path / "remote"))
    text = str(offer)
    assert not HEX64.search(text) and "--key " not in text

    def shell(command: str, cwd: Path, machine: Till) -> None:
        if "--follow" in command:
            return  # runs until interrupted
        ran = subprocess.run(
            ["sh", "-c", command], cwd=cwd, env=machine.env(), capture_output=True, text=True
        )
        assert ran.returncode == 0, (command, ran.stderr)

    for command in offer.here_commands:
        shell(command, folder, till)
    made = till.user_home / "project.tillage-key"
    assert made.stat().st_mode & 0o777 == 0o600  # the person copies it over (same home here)
    (tmp_path / "b").mkdir()
    b = other(tmp_path, till)
    for command in offer.there_commands:
        shell(command, tmp_path / "b", b)
    assert (tmp_path / "b" / "project" / "src.txt").read_text() == "source\n"


@pytest.mark.process
def test_a_key_is_handed_over_even_when_till_starts_with_stdin_closed(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    remote, key = published(tmp_path, till, folder)
    b = other(tmp_path, till)
    till_cmd = f"{sys.executable} -m tillage --json clone {remote} out"
    for how, env in ((f"--key {key}", {}), ("", {"TILLAGE_RECOVERY_KEY": key})):
        ran = subprocess.run(
            ["sh", "-c", f"exec {till_cmd} {how} <&-"],
            cwd=tmp_path / "b",
            env={**b.env(), **env},
            capture_output=True,
            text=True,
        )
        assert ran.returncode == 0, ran.stdout
        shutil.rmtree(tmp_path / "b" / "out")
