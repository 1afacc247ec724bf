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


def test_a_key_in_till_s_own_words_or_the_environment_is_held() -> None:
    assert held(["work", "--key", KEY, "--", "x"], {}) == (KEY, None)
    assert held(["clone", f"--key={KEY}", "u"], {}) == (KEY, None)
    assert held(["mcp"], {"TILLAGE_RECOVERY_KEY": KEY}) == (None, KEY)
    assert held(["run", "x", "--", "cmd", "--key", KEY], {}) is None  # the user's command's
    assert held(["work", "--key", HIDDEN], {}) is None  # handed over already
    assert held(["status"], {"TILLAGE_RECOVERY_KEY_FILE": "/k"}) is None  # a path, not a key


def test_the_re_executed_argv_hides_every_key_value_and_keeps_the_users_command() -> None:
    argv = ["work", "--key", KEY, f"--key={KEY}", "--", "echo", "--key", KEY]
    assert scrubbed(argv) == [
        "work", "--key", HIDDEN, f"--key={HIDDEN}", "--", "echo", "--key", KEY,
    ]  # fmt: skip


def test_a_handoff_round_trips_any_value_without_nul() -> None:
    for given, exported in [(KEY, None), (None, KEY), ("x" * 10, "é\udcff"), (None, None)]:
        assert keyhandoff._unpack(keyhandoff._pack(given, exported)) == (given, exported)
    assert keyhandoff._unpack(b"not a handoff\0x") == (None, None)


def test_receive_reads_a_handoff_pipe_once_and_forgets_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(keyhandoff, "_HANDED", {})
    read_fd, write_fd = os.pipe()
    os.write(write_fd, keyhandoff._pack(KEY, None))
    os.close(write_fd)
    monkeypatch.setenv("TILLAGE_RECOVERY_KEY_FD", str(read_fd))
    keyhandoff.receive()
    assert keyhandoff.handed() == (KEY, None)
    assert "TILLAGE_RECOVERY_KEY_FD" not in os.environ
    with pytest.raises(OSError):
        os.fstat(read_fd)  # closed


def test_receive_never_reads_stdin_or_a_file_named_by_a_stray_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(keyhandoff, "_HANDED", {})
    plain = tmp_path / "f"
    plain.write_bytes(keyhandoff._pack(KEY, KEY))
    fd = os.open(plain, os.O_RDONLY)
    try:
        for value in ("0", str(fd), "x", "-1"):
            monkeypatch.setenv("TILLAGE_RECOVERY_KEY_FD", value)
            keyhandoff.receive()
            assert keyhandoff.handed() == (None, None)
            assert "TILLAGE_RECOVERY_KEY_FD" not in os.environ
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # never read
    finally:
        os.close(fd)
