"""platform/keyhandoff.py: what counts as holding the key, what the re-executed argv keeps, and
that the receiving side reads only a pipe holding a handoff (a stray descriptor number, stdin
included, is never read)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tillage.platform import keyhandoff
from tillage.platform.keyhandoff import HIDDEN, held, scrubbed

pytestmark = pytest.mark.unit
KEY = "ab" * 32


def test_a_key_or_its_file_in_till_s_own_words_or_the_environment_is_held() -> None:
    assert held(["work", "--key", KEY, "--", "x"], {}) == {"key": KEY}
    assert held(["clone", f"--key={KEY}", "u"], {}) == {"key": KEY}
    assert held(["clone", "--key-file", "/k", "u"], {}) == {"key_file": "/k"}
    assert held(["clone", "--key-f=/k", "u"], {}) == {"key_file": "/k"}  # argparse's prefix
    assert held(["mcp"], {"TILLAGE_RECOVERY_KEY": KEY}) == {"env": KEY}
    assert held(["work"], {"TILLAGE_RECOVERY_KEY_FILE": "/k"}) == {"env_file": "/k"}
    assert held(["run", "x", "--", "cmd", "--key", KEY], {}) == {}  # the user's command's
    assert held(["work", "--key", HIDDEN, "--key-file", HIDDEN], {}) == {}  # handed already
    assert held(["status", "--keyring", "x"], {"TILLAGE_RECOVERY_KEY_FD": "3"}) == {}


def test_the_re_executed_argv_hides_every_key_value_and_keeps_the_users_command() -> None:
    argv = ["work", "--key", KEY, f"--key={KEY}", "--key-fi", "/k", "--", "echo", "--key", KEY]
    assert scrubbed(argv) == [
        "work", "--key", HIDDEN, f"--key={HIDDEN}", "--key-fi", HIDDEN,
        "--", "echo", "--key", KEY,
    ]  # fmt: skip


def test_a_handoff_round_trips_any_value_without_nul() -> None:
    for found in [{"key": KEY}, {"env": KEY, "env_file": "/a=b"}, {"key_file": "é\udcff"}, {}]:
        assert keyhandoff._unpack(keyhandoff._pack(found)) == found
    assert keyhandoff._unpack(b"not a handoff\0key=x") == {}


def test_receive_reads_a_handoff_pipe_once_and_forgets_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(keyhandoff, "_HANDED", {})
    read_fd, write_fd = os.pipe()
    os.write(write_fd, keyhandoff._pack({"key": KEY}))
    os.close(write_fd)
    monkeypatch.setenv("TILLAGE_RECOVERY_KEY_FD", str(read_fd))
    keyhandoff.receive()
    assert keyhandoff.handed("key") == KEY and keyhandoff.handed("env") is None
    assert "TILLAGE_RECOVERY_KEY_FD" not in os.environ
    with pytest.raises(OSError):
        os.fstat(read_fd)  # closed


def test_receive_never_reads_stdin_or_a_file_named_by_a_stray_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(keyhandoff, "_HANDED", {})
    plain = tmp_path / "f"
    plain.write_bytes(keyhandoff._pack({"key": KEY, "env": KEY}))
    fd = os.open(plain, os.O_RDONLY)
    try:
        for value in ("0", str(fd), "x", "-1"):
            monkeypatch.setenv("TILLAGE_RECOVERY_KEY_FD", value)
            keyhandoff.receive()
            assert keyhandoff.handed("key") is None and keyhandoff.handed("env") is None
            assert "TILLAGE_RECOVERY_KEY_FD" not in os.environ
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # never read
    finally:
        os.close(fd)
