"""THE contract of the Remote seam, held against every transport (memory, directory, ssh, s3).

Written against the `remote` fixture only (tests/remote/conftest.py), so a transport that
passes here is one the sync engine can use unchanged. Fault tests of one transport (a helper
killed mid-frame, a refused connection) live with that transport.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import pytest

from tillage.remote.base import Remote, Versioned
from tillage.remote.errors import InvalidRemoteNameError, RemoteMissingError
from tillage.remote.names import NAME_LIMIT
from tillage.remote.url import open_remote

T = TypeVar("T")
HEX = "0123456789abcdef"
WAIT = 120.0  # the longest any thread of these tests may take (a slow CI machine, 8 MiB)


def object_name(i: int) -> str:
    digest = f"{i:064x}"
    return f"objects/{digest[:2]}/{digest}"


def reopen(remote: Remote, env: Mapping[str, str], cwd: Path) -> Remote:
    return open_remote(remote.url, env, str(cwd))


def run_threads(count: int, work: Callable[[int], T]) -> list[T]:
    """Runs `work(i)` in `count` threads released together; returns their results in order,
    re-raising the first failure. Bounded: a thread that hangs fails the test."""
    barrier = threading.Barrier(count)
    results: dict[int, T] = {}
    failures: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait(timeout=WAIT)
            results[i] = work(i)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT)
        assert not thread.is_alive(), "a thread of the race did not finish"
    if failures:
        raise failures[0]
    return [results[i] for i in range(count)]


def test_a_fresh_remote_holds_nothing(remote: Remote) -> None:
    assert remote.list("") == []
    assert remote.exists(["config", object_name(1)]) == set()


@pytest.mark.parametrize("size", [0, 1, 1 << 20, 8 << 20], ids=["0B", "1B", "1MiB", "8MiB"])
def test_a_put_reads_back_byte_for_byte(remote: Remote, size: int) -> None:
    data = os.urandom(size)
    remote.put(object_name(size), data)
    assert remote.get(object_name(size)) == data
    assert remote.exists([object_name(size)]) == {object_name(size)}


def test_every_byte_value_and_every_name_character_survive(remote: Remote) -> None:
    data = bytes(range(256)) * 3 + b"\n\r\n\0"
    name = "abcdefghijklmnopqrstuvwxyz/0123456789/a.b_c-d"
    remote.put(name, data)
    assert remote.get(name) == data
    assert remote.list("") == [name]


def test_a_put_over_a_name_replaces_it(remote: Remote) -> None:
    remote.put("config", b"first version, longer than the second")
    remote.put("config", b"second")
    assert remote.get("config") == b"second"
    assert remote.list("") == ["config"]


def test_a_missing_name_is_remote_missing(remote: Remote) -> None:
    remote.put(object_name(1), b"x")
    with pytest.raises(RemoteMissingError) as caught:
        remote.get(object_name(2))
    assert caught.value.name == object_name(2)
    with pytest.raises(RemoteMissingError):
        remote.get("refs/" + "a" * 64)


def test_a_range_reads_exactly_that_part_of_a_name(remote: Remote) -> None:
    data = os.urandom(3 << 20)
    remote.put("packs/p", data)
    assert remote.get_range("packs/p", 0, 10) == data[:10]
    assert remote.get_range("packs/p", 1 << 20, 65536) == data[1 << 20 : (1 << 20) + 65536]
    assert remote.get_range("packs/p", len(data) - 5, 100) == data[-5:]  # cut short at the end
    assert remote.get_range("packs/p", len(data) + 10, 100) == b""  # past the end: nothing
    assert remote.get_range("packs/p", -57, 57) == data[-57:]  # from the end
    assert remote.get_range("packs/p", 0, len(data)) == data
    with pytest.raises(RemoteMissingError):
        remote.get_range("packs/absent", 0, 10)
    with pytest.raises(RemoteMissingError):
        remote.get_range("packs/absent", -57, 57)


def test_exists_answers_a_batch_of_a_thousand_names(remote: Remote) -> None:
    present = {object_name(i) for i in range(0, 1000, 7)}
    for name in present:
        remote.put(name, name.encode())
    asked = [object_name(i) for i in range(1000)]
    assert remote.exists(asked) == present
    assert remote.exists(asked[::-1]) == present
    assert remote.exists([]) == set()
    assert remote.exists([object_name(0), object_name(0)]) == {object_name(0)}


def test_a_folder_of_names_is_not_itself_a_name(remote: Remote) -> None:
    remote.put("objects/ab/cd", b"x")
    assert remote.exists(["objects", "objects/ab"]) == set()
    with pytest.raises(RemoteMissingError):
        remote.get("objects/ab")
    assert remote.read_versioned("objects/ab") is None
    remote.delete("objects/ab")
    assert remote.get("objects/ab/cd") == b"x"


def test_list_returns_the_names_that_start_with_a_prefix_in_order(remote: Remote) -> None:
    names = [
        "config",
        "objects/aa/aa01",
        "objects/aa/aa00",
        "objects/ab/ab00",
        "objects/aab",
        "objects/b0/b000",
        "refs/ff",
        "refs/0f",
        "leases/0f",
    ]
    for name in names:
        remote.put(name, b"v")
    assert remote.list("") == sorted(names)
    assert remote.list("objects/") == sorted(n for n in names if n.startswith("objects/"))
    assert remote.list("objects/aa") == ["objects/aa/aa00", "objects/aa/aa01", "objects/aab"]
    assert remote.list("objects/aa/") == ["objects/aa/aa00", "objects/aa/aa01"]
    assert remote.list("objects/a") == [
        "objects/aa/aa00",
        "objects/aa/aa01",
        "objects/aab",
        "objects/ab/ab00",
    ]
    assert remote.list("refs/") == ["refs/0f", "refs/ff"]
    assert remote.list("refs/f") == ["refs/ff"]
    assert remote.list("config") == ["config"]
    assert remote.list("conf") == ["config"]
    assert remote.list("nothing/") == []
    assert remote.list("config/") == []


def test_list_sees_many_names_across_folders(remote: Remote) -> None:
    names = [object_name(i * 977) for i in range(300)]
    for name in names:
        remote.put(name, b"")
    assert remote.list("objects/") == sorted(names)
    assert remote.list("objects/0") == sorted(n for n in names if n.startswith("objects/0"))


def test_delete_removes_a_name_and_an_absent_one_is_fine(remote: Remote) -> None:
    remote.put("refs/aa", b"1")
    remote.put("refs/ab", b"2")
    remote.delete("refs/aa")
    assert remote.exists(["refs/aa", "refs/ab"]) == {"refs/ab"}
    assert remote.list("refs/") == ["refs/ab"]
    with pytest.raises(RemoteMissingError):
        remote.get("refs/aa")
    remote.delete("refs/aa")
    remote.delete("leases/never")
    remote.delete("never/was/here")
    assert remote.get("refs/ab") == b"2"


def test_read_versioned_gives_the_bytes_and_a_token_that_follows_the_version(
    remote: Remote,
) -> None:
    assert remote.read_versioned("refs/aa") is None
    remote.put("refs/aa", b"one")
    first = remote.read_versioned("refs/aa")
    assert isinstance(first, Versioned) and first.data == b"one" and first.token
    again = remote.read_versioned("refs/aa")
    assert again is not None and again.token == first.token
    remote.put("refs/aa", b"two")
    second = remote.read_versioned("refs/aa")
    assert second is not None and second.data == b"two" and second.token != first.token


def test_write_if_creates_only_when_absent(remote: Remote) -> None:
    assert remote.write_if("leases/aa", b"mine", None) is True
    assert remote.write_if("leases/aa", b"theirs", None) is False
    assert remote.get("leases/aa") == b"mine"
    assert remote.write_if("leases/aa", b"mine", None) is False  # same bytes: still present


def test_write_if_replaces_only_the_version_it_read(remote: Remote) -> None:
    remote.put("refs/aa", b"v1")
    seen = remote.read_versioned("refs/aa")
    assert seen is not None
    assert remote.write_if("refs/aa", b"v2", seen.token) is True
    assert remote.get("refs/aa") == b"v2"
    assert remote.write_if("refs/aa", b"v3", seen.token) is False  # stale: v2 is there now
    assert remote.get("refs/aa") == b"v2"
    now = remote.read_versioned("refs/aa")
    assert now is not None and now.token != seen.token
    assert remote.write_if("refs/aa", b"v3", now.token) is True
    assert remote.get("refs/aa") == b"v3"


def test_a_put_between_read_and_write_if_makes_the_token_stale(remote: Remote) -> None:
    remote.put("refs/aa", b"v1")
    seen = remote.read_versioned("refs/aa")
    assert seen is not None
    remote.put("refs/aa", b"someone else's")
    assert remote.write_if("refs/aa", b"mine", seen.token) is False
    assert remote.get("refs/aa") == b"someone else's"


def test_write_if_with_a_token_loses_on_an_absent_name(remote: Remote) -> None:
    remote.put("refs/aa", b"v1")
    seen = remote.read_versioned("refs/aa")
    assert seen is not None
    remote.delete("refs/aa")
    assert remote.write_if("refs/aa", b"v2", seen.token) is False
    assert remote.read_versioned("refs/aa") is None
    assert remote.write_if("refs/aa", b"v3", None) is True  # deleted: creatable again
    assert remote.get("refs/aa") == b"v3"


def test_threads_racing_to_create_one_name_let_exactly_one_win(
    remote: Remote, remote_env: Mapping[str, str], tmp_path: Path
) -> None:
    count = 8
    remotes = [reopen(remote, remote_env, tmp_path) for _ in range(count)]
    try:
        wins = run_threads(
            count, lambda i: remotes[i].write_if("leases/aa", f"writer {i}".encode(), None)
        )
    finally:
        for each in remotes:
            each.close()
    assert wins.count(True) == 1, wins
    assert remote.get("leases/aa") == f"writer {wins.index(True)}".encode()


def test_threads_racing_to_replace_one_version_let_exactly_one_win(
    remote: Remote, remote_env: Mapping[str, str], tmp_path: Path
) -> None:
    remote.put("refs/aa", b"base")
    seen = remote.read_versioned("refs/aa")
    assert seen is not None
    count = 8
    remotes = [reopen(remote, remote_env, tmp_path) for _ in range(count)]
    try:
        wins = run_threads(
            count, lambda i: remotes[i].write_if("refs/aa", f"next {i}".encode(), seen.token)
        )
    finally:
        for each in remotes:
            each.close()
    assert wins.count(True) == 1, wins
    assert remote.get("refs/aa") == f"next {wins.index(True)}".encode()


def test_one_remote_serves_many_threads_at_once(remote: Remote) -> None:
    def work(i: int) -> bool:
        names = [object_name(i * 100 + j) for j in range(20)]
        for name in names:
            remote.put(name, name.encode() * 50)
        assert remote.exists(names) == set(names)
        assert all(remote.get(name) == name.encode() * 50 for name in names)
        return remote.write_if(f"leases/{i:02x}", b"held", None)

    assert run_threads(6, work) == [True] * 6
    assert len(remote.list("objects/")) == 120


BAD_NAMES = [
    "",
    "/config",
    "config/",
    "refs//aa",
    ".",
    "..",
    "refs/../config",
    "./config",
    "refs/.aa",
    ".config.lock",
    "Config",
    "refs/a a",
    "refs/a\nb",
    "refs/a\0b",
    "refs/é",
    "refs\\aa",
    "a" * (NAME_LIMIT + 1),
    "refs/" + "a" * 256,
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=range(len(BAD_NAMES)))
def test_a_name_outside_the_shape_is_refused_by_every_method(remote: Remote, name: str) -> None:
    calls: list[Callable[[], object]] = [
        lambda: remote.put(name, b"x"),
        lambda: remote.get(name),
        lambda: remote.exists([name]),
        lambda: remote.exists(["config", name]),
        lambda: remote.delete(name),
        lambda: remote.read_versioned(name),
        lambda: remote.write_if(name, b"x", None),
        lambda: remote.write_if(name, b"x", "token"),
    ]
    for call in calls:
        with pytest.raises(InvalidRemoteNameError):
            call()
    assert remote.list("") == []


@pytest.mark.parametrize("prefix", ["/", "/refs", "..", "../", "refs/../", "refs/.", "A", " "])
def test_a_prefix_outside_the_shape_is_refused(remote: Remote, prefix: str) -> None:
    with pytest.raises(InvalidRemoteNameError):
        remote.list(prefix)


def test_the_longest_names_are_accepted(remote: Remote) -> None:
    longest = "a" * 255 + "/" + "b" * 254 + "/c"
    assert len(longest) == NAME_LIMIT
    remote.put(longest, b"x")
    assert remote.get(longest) == b"x"
    assert remote.list("a") == [longest]


def test_a_remote_reopened_from_its_url_sees_what_was_written(
    remote: Remote, remote_env: Mapping[str, str], tmp_path: Path
) -> None:
    remote.put("config", b"sealed config")
    remote.put(object_name(5), b"object five")
    assert remote.write_if("refs/aa", b"head 1", None)
    before = remote.read_versioned("refs/aa")
    assert before is not None

    other = reopen(remote, remote_env, tmp_path)
    try:
        assert other.url == remote.url
        assert other.list("") == remote.list("")
        assert other.get(object_name(5)) == b"object five"
        seen = other.read_versioned("refs/aa")
        assert seen == before  # same bytes, same token, from another connection
        assert other.write_if("refs/aa", b"head 2", seen.token) is True
        other.put(object_name(6), b"object six")
    finally:
        other.close()
        other.close()  # twice is fine
    assert remote.get("refs/aa") == b"head 2"
    assert remote.write_if("refs/aa", b"head 3", before.token) is False
    assert remote.exists([object_name(5), object_name(6)]) == {object_name(5), object_name(6)}


def test_the_url_holds_no_secret_from_the_environment(
    remote: Remote, remote_env: Mapping[str, str]
) -> None:
    for key, value in remote_env.items():
        if any(word in key for word in ("SECRET", "TOKEN", "PASSWORD")) and len(value) >= 8:
            assert value not in remote.url
            assert value not in repr(remote)
