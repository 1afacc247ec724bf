"""open_remote: every URL form a person writes, and the errors for the ones that name nothing."""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from pathlib import Path

import pytest

from tillage.errors import InvalidArgumentError, all_error_classes, catalogue_problems
from tillage.remote.directory import DirectoryRemote
from tillage.remote.errors import (
    BadRemoteUrlError,
    RemoteProtocolError,
    RemoteUnavailableError,
)
from tillage.remote.memory import MemoryRemote, discard_space
from tillage.remote.names import check_name, check_prefix, is_name
from tillage.remote.url import open_remote, remote_kind


def test_a_relative_folder_is_taken_against_the_callers_folder(tmp_path: Path) -> None:
    remote = open_remote("backups/./remote/", {}, str(tmp_path))
    assert isinstance(remote, DirectoryRemote)
    assert remote.url == f"{tmp_path}/backups/remote"
    remote.put("config", b"x")
    assert (tmp_path / "backups" / "remote" / "config").read_bytes() == b"x"
    assert open_remote(remote.url, {}, "/").get("config") == b"x"


def test_a_home_folder_comes_from_the_given_environment(tmp_path: Path) -> None:
    remote = open_remote("~/remote", {"HOME": str(tmp_path)}, "/")
    assert remote.url == f"{tmp_path}/remote"


def test_file_urls_name_absolute_folders(tmp_path: Path) -> None:
    assert open_remote(f"file://{tmp_path}/r", {}, "/").url == f"{tmp_path}/r"
    assert open_remote(f"file://localhost{tmp_path}/r", {}, "/").url == f"{tmp_path}/r"
    assert open_remote(f"FILE://{tmp_path}/a%20b", {}, "/").url == f"{tmp_path}/a b"
    with pytest.raises(BadRemoteUrlError):
        open_remote("file://relative/folder", {}, str(tmp_path))


def test_a_folder_whose_name_holds_a_colon_is_written_with_dot_slash(tmp_path: Path) -> None:
    assert open_remote("./a:b", {}, str(tmp_path)).url == f"{tmp_path}/a:b"
    with pytest.raises(BadRemoteUrlError) as caught:
        open_remote("backup-host:remotes/work", {}, str(tmp_path))
    assert "ssh://host/path" in caught.value.message


def test_memory_urls_share_one_space_per_name() -> None:
    one = open_remote("memory://shared-test", {}, "/")
    two = open_remote("memory://shared-test", {}, "/")
    try:
        assert isinstance(one, MemoryRemote) and one.url == "memory://shared-test"
        one.put("config", b"x")
        assert two.get("config") == b"x"
        assert MemoryRemote().list("") == []  # a fresh one of its own
    finally:
        discard_space("shared-test")
    assert open_remote("memory://shared-test", {}, "/").list("") == []
    discard_space("shared-test")


@pytest.mark.parametrize(
    "url",
    [
        "",
        " /x",
        "/x\n",
        "a\0b",
        "http://host/x",
        "ftp://host/x",
        "sftp://h/x",
        "memory://",
        "memory://a/b",
    ],
)
def test_a_url_that_names_nothing_is_bad_url(url: str) -> None:
    with pytest.raises(BadRemoteUrlError) as caught:
        open_remote(url, {}, "/")
    error = caught.value
    assert (error.code, error.name) == (-32292, "sync.bad_url")
    assert isinstance(error, InvalidArgumentError)


def test_remote_kind_tells_the_transport_without_opening_anything() -> None:
    assert remote_kind("/srv/x") == "directory"
    assert remote_kind("rel") == "directory"
    assert remote_kind("file:///x") == "directory"
    assert remote_kind("memory://x") == "memory"
    assert remote_kind("ssh://me@host:2222/srv/x") == "ssh"
    assert remote_kind("SSH://host/x") == "ssh"
    assert remote_kind("s3://bucket/prefix") == "s3"


@pytest.mark.parametrize(
    ("scheme", "module", "class_name"), [("ssh", "ssh", "SshRemote"), ("s3", "s3", "S3Remote")]
)
def test_ssh_and_s3_urls_go_to_their_transport_with_the_environment(
    monkeypatch: pytest.MonkeyPatch, scheme: str, module: str, class_name: str
) -> None:
    calls: list[tuple[str, Mapping[str, str]]] = []
    opened = MemoryRemote()

    class Fake:
        @classmethod
        def from_url(cls, url: str, env: Mapping[str, str]) -> MemoryRemote:
            calls.append((url, env))
            return opened

    fake = types.ModuleType(f"tillage.remote.{module}")
    setattr(fake, class_name, Fake)
    monkeypatch.setitem(sys.modules, f"tillage.remote.{module}", fake)
    env = {"TILLAGE_SSH": "ssh -p 1", "AWS_REGION": "x"}
    url = f"{scheme}://host/some/path"
    assert open_remote(url, env, "/tmp") is opened
    assert calls == [(url, env)]


def test_a_build_without_a_transport_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tillage.remote.s3", None)
    with pytest.raises(RemoteUnavailableError) as caught:
        open_remote("s3://bucket/x", {}, "/")
    assert "no s3 transport" in caught.value.message


def test_names_have_one_shape() -> None:
    assert is_name("config") and is_name("objects/ab/" + "ab" * 32) and is_name("a-b_c.d")
    assert is_name("a" * 255 + "/" + "b" * 254 + "/c")
    for bad in ("", "a/", "/a", "a//b", ".a", "a/..", "A", "a b", "a" * 256, "a/" * 300, 7, None):
        assert not is_name(bad)
    assert check_name("refs/x") == "refs/x"
    assert check_prefix("") == "" and check_prefix("objects/") == "objects/"
    assert check_prefix("objects/a") == "objects/a"


def test_the_remote_errors_are_in_the_catalogue_with_their_codes() -> None:
    assert (RemoteUnavailableError.code, RemoteUnavailableError.name) == (
        -32290,
        "sync.remote_unavailable",
    )
    assert (RemoteProtocolError.code, RemoteProtocolError.name) == (-32291, "sync.remote_protocol")
    assert (BadRemoteUrlError.code, BadRemoteUrlError.name) == (-32292, "sync.bad_url")
    import tillage.crypto.errors  # noqa: F401  (sync.bad_key shares the module's range)

    assert catalogue_problems(list(all_error_classes())) == []
