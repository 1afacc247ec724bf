"""The directory remote's own promises beyond the contract: crash safety, the files it keeps
for itself, cross-process compare-and-swap, and a folder it cannot use told as such."""

from __future__ import annotations

import errno
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tillage.platform.errors import DiskFullError
from tillage.remote import directory as directory_module
from tillage.remote.directory import DirectoryRemote
from tillage.remote.errors import RemoteUnavailableError
from tillage.remote.url import open_remote

DEADLINE = 60.0


def test_names_are_files_at_their_paths_fanned_out_by_folder(tmp_path: Path) -> None:
    remote = DirectoryRemote(tmp_path / "r")
    name = "objects/ab/" + "ab" * 32
    remote.put(name, b"sealed")
    remote.put("config", b"check")
    assert (tmp_path / "r" / "objects" / "ab" / ("ab" * 32)).read_bytes() == b"sealed"
    assert (tmp_path / "r" / "config").read_bytes() == b"check"
    assert sorted(os.listdir(tmp_path / "r")) == ["config", "objects"]  # no temporaries left


def test_a_missing_folder_reads_as_empty_and_the_first_write_creates_it(tmp_path: Path) -> None:
    remote = DirectoryRemote(tmp_path / "a" / "b" / "remote")
    assert remote.list("") == []
    assert remote.exists(["config"]) == set()
    assert remote.read_versioned("config") is None
    assert not (tmp_path / "a").exists()
    assert remote.write_if("config", b"x", None)
    assert (tmp_path / "a" / "b" / "remote" / "config").read_bytes() == b"x"


def test_temporaries_locks_and_foreign_files_are_never_names(tmp_path: Path) -> None:
    remote = DirectoryRemote(tmp_path)
    remote.put("refs/aa", b"head")
    seen = remote.read_versioned("refs/aa")
    assert seen is not None and remote.write_if("refs/aa", b"head 2", seen.token)
    (tmp_path / "refs" / ".aa.tillage-tmp-1234").write_bytes(b"half a head")
    (tmp_path / "README.TXT").write_text("a person's note")
    (tmp_path / "refs" / "has space").write_text("x")
    os.symlink(tmp_path, tmp_path / "loop")
    assert sorted(os.listdir(tmp_path / "refs")) == [
        ".aa.lock",
        ".aa.tillage-tmp-1234",
        "aa",
        "has space",
    ]
    assert remote.list("") == ["refs/aa"]
    assert remote.get("refs/aa") == b"head 2"


@pytest.mark.process
def test_a_put_killed_at_any_moment_leaves_whole_names_only(tmp_path: Path) -> None:
    root = tmp_path / "remote"
    writer = textwrap.dedent(
        f"""
        import sys
        from tillage.remote.directory import DirectoryRemote
        remote = DirectoryRemote({str(root)!r})
        i = 0
        while True:
            name = f"objects/{{i % 7:02x}}/{{i:064x}}"
            remote.put(name, name.encode() * 20000)
            remote.put("refs/aa", str(i).encode() * 50000)
            i += 1
            print(i, flush=True)
        """
    )
    for round_ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            target = 3 + 4 * round_
            deadline = time.monotonic() + DEADLINE
            for line in proc.stdout:
                if int(line) >= target or time.monotonic() > deadline:
                    break
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=DEADLINE)
            if proc.stdout is not None:
                proc.stdout.close()
        remote = DirectoryRemote(root)
        names = remote.list("objects/")
        assert len(names) >= 3
        for name in names:
            assert remote.get(name) == name.encode() * 20000
        head = remote.get("refs/aa")
        count = len(head) // 50000
        assert head == head[:count] * 50000
        assert remote.list("refs/") == ["refs/aa"]


@pytest.mark.process
def test_processes_racing_on_write_if_let_exactly_one_win(tmp_path: Path) -> None:
    root, go = tmp_path / "remote", tmp_path / "go"
    racer = textwrap.dedent(
        f"""
        import os, sys, time
        from tillage.remote.directory import DirectoryRemote
        remote = DirectoryRemote({str(root)!r})
        print("ready", flush=True)
        deadline = time.monotonic() + {DEADLINE}
        while not os.path.exists({str(go)!r}) and time.monotonic() < deadline:
            time.sleep(0.001)
        print(remote.write_if("leases/aa", sys.argv[1].encode(), None), flush=True)
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", racer, f"writer {i}"], stdout=subprocess.PIPE, text=True
        )
        for i in range(4)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        go.touch()
        outcomes = [proc.communicate(timeout=DEADLINE)[0].strip() for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert sorted(outcomes) == ["False", "False", "False", "True"]
    winner = outcomes.index("True")
    assert DirectoryRemote(root).get("leases/aa") == f"writer {winner}".encode()


def test_a_file_where_the_folder_should_be_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(RemoteUnavailableError) as caught:
        open_remote(str(tmp_path / "file"), {}, "/")
    assert caught.value.code == -32290 and "not a folder" in caught.value.message
    assert str(tmp_path / "file") in caught.value.message
    with pytest.raises(RemoteUnavailableError) as caught:
        DirectoryRemote(tmp_path / "file" / "below")
    assert "Not a directory" in caught.value.message


def test_a_name_below_a_name_is_unavailable_not_a_traceback(tmp_path: Path) -> None:
    # S3 would hold both "refs" and "refs/aa"; a folder cannot, and says so.
    remote = DirectoryRemote(tmp_path)
    remote.put("refs", b"a file where a folder would be")
    for attempt in (
        lambda: remote.put("refs/aa", b"x"),
        lambda: remote.write_if("refs/aa", b"", None),
    ):
        with pytest.raises(RemoteUnavailableError) as caught:
            attempt()
        assert "refs/aa" in caught.value.message
    assert remote.exists(["refs/aa"]) == set()
    assert remote.list("refs/") == []
    remote.delete("refs/aa")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder")
def test_a_folder_it_may_not_read_is_unavailable(tmp_path: Path) -> None:
    root = tmp_path / "locked"
    root.mkdir()
    root.chmod(0)
    try:
        with pytest.raises(RemoteUnavailableError) as caught:
            DirectoryRemote(root)
        assert "permission" in caught.value.message
    finally:
        root.chmod(0o755)


def test_a_full_disk_is_unavailable_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(path: Path, data: bytes, **_options: object) -> None:
        raise DiskFullError("no space left while writing")

    remote = DirectoryRemote(tmp_path)
    monkeypatch.setattr(directory_module, "atomic_write", full)
    for attempt in (lambda: remote.put("config", b"x"), lambda: remote.write_if("a", b"", None)):
        with pytest.raises(RemoteUnavailableError) as caught:
            attempt()
        assert "no space left" in caught.value.message


def test_another_failure_of_the_file_system_is_unavailable_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path, data: bytes, **_options: object) -> None:
        raise OSError(errno.EIO, "Input/output error", str(path))

    remote = DirectoryRemote(tmp_path)
    monkeypatch.setattr(directory_module, "atomic_write", broken)
    with pytest.raises(RemoteUnavailableError) as caught:
        remote.put("config", b"x")
    assert "Input/output error" in caught.value.message
    assert caught.value.details["errno"] == errno.EIO


def test_a_directory_remote_is_readable_by_its_owner_alone(tmp_path: Path) -> None:
    root = tmp_path / "new-remote"
    remote = DirectoryRemote(root)
    remote.put("packs/" + "ab" * 32, b"sealed")
    remote.write_if("refs/" + "cd" * 32, b"head", None)
    remote.put("config", b"config")
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    for dirpath, dirs, files in os.walk(root):
        for name in dirs:
            assert stat.S_IMODE(os.stat(os.path.join(dirpath, name)).st_mode) == 0o700, name
        for name in files:  # the names and the lock files beside them
            assert stat.S_IMODE(os.stat(os.path.join(dirpath, name)).st_mode) == 0o600, name
