"""The S3 remote's own faults and edges, against moto on 127.0.0.1 (tests/remote/s3_server.py).

The contract suite (test_contract.py) holds S3Remote to the seam; these tests hold what only S3
has: the URL and its environment, a missing bucket, refused credentials, an endpoint that is
down or silent, conditional writes raced by separate processes, replies lost mid-write, and
objects large enough to go up in parts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import obstore
import pytest
from obstore.exceptions import GenericError

from tests.helpers import free_port
from tests.remote.s3_server import MotoServer, start_moto
from tillage.platform.names import random_hex
from tillage.remote import s3
from tillage.remote.base import Remote
from tillage.remote.errors import BadRemoteUrlError, RemoteMissingError, RemoteUnavailableError
from tillage.remote.s3 import S3Remote
from tillage.remote.url import open_remote

FAIL_WITHIN = 15.0  # seconds: an unreachable store must be told, not waited on


def every_call(remote: S3Remote) -> dict[str, Callable[[], object]]:
    """One call of each Remote method, for tests that expect them all to fail alike."""
    return {
        "exists": lambda: remote.exists(["config", "refs/aa"]),
        "put": lambda: remote.put("config", b"x"),
        "get": lambda: remote.get("config"),
        "list": lambda: remote.list(""),
        "delete": lambda: remote.delete("config"),
        "read_versioned": lambda: remote.read_versioned("refs/aa"),
        "write_if create": lambda: remote.write_if("refs/aa", b"x", None),
        "write_if replace": lambda: remote.write_if("refs/aa", b"x", '"0123"'),
    }


def fails_unavailable(call: Callable[[], object]) -> tuple[RemoteUnavailableError, float]:
    started = time.monotonic()
    with pytest.raises(RemoteUnavailableError) as caught:
        call()
    return caught.value, time.monotonic() - started


@pytest.fixture
def bucket(s3_server: MotoServer) -> Iterator[str]:
    name = f"tillage-{random_hex(8)}"
    s3_server.create_bucket(name)
    yield name
    s3_server.remove_bucket(name)


# -- the URL and the environment ------------------------------------------------------------


ENV = {"AWS_ACCESS_KEY_ID": "id-for-tests", "AWS_SECRET_ACCESS_KEY": "secret-for-tests-0000"}


@pytest.mark.parametrize(
    "url",
    [
        "s3://",
        "s3://ab",
        "s3://Bucket",
        "s3://bucket_name",
        "s3://-bucket",
        "s3://bucket-",
        "s3://buck..et",
        "s3://" + "b" * 64,
        "s3://bucket:9000/x",
        "s3://key:secret@bucket/x",
        "s3://bucket/x?versionId=1",
        "s3://bucket/x#frag",
        "s3://bucket//x",
        "s3://bucket/a//b",
        "s3://bucket/../x",
        "s3://bucket/a/./b",
        "s3://bucket/a b",
        "s3://bucket/caf\u00e9",
    ],
)
def test_a_malformed_s3_url_is_a_bad_url(url: str) -> None:
    with pytest.raises(BadRemoteUrlError):
        S3Remote.from_url(url, ENV)
    with pytest.raises(BadRemoteUrlError):
        open_remote(url, ENV, "/")


@pytest.mark.parametrize(
    ("url", "shown", "prefix"),
    [
        ("s3://bucket", "s3://bucket", ""),
        ("s3://bucket/", "s3://bucket", ""),
        ("s3://my.bucket-1/team/Sync_2/", "s3://my.bucket-1/team/Sync_2", "team/Sync_2"),
    ],
)
def test_a_well_formed_s3_url_opens_without_touching_the_network(
    url: str, shown: str, prefix: str
) -> None:
    remote = open_remote(url, {**ENV, "TILLAGE_S3_ENDPOINT": "https://s3.example.net"}, "/")
    assert isinstance(remote, S3Remote)
    assert remote.url == shown
    assert remote.location.prefix == prefix
    assert remote.location.endpoint == "https://s3.example.net"
    assert not remote.location.virtual_hosted  # a custom endpoint is addressed path-style


def test_plain_http_is_refused_unless_allowed() -> None:
    env = {**ENV, "TILLAGE_S3_ENDPOINT": "http://127.0.0.1:9000"}
    with pytest.raises(BadRemoteUrlError) as caught:
        open_remote("s3://bucket", env, "/")
    assert "TILLAGE_S3_ALLOW_HTTP=1" in caught.value.next
    assert "plain http" in caught.value.message
    for no in ("", "0", "no"):
        with pytest.raises(BadRemoteUrlError):
            open_remote("s3://bucket", {**env, "TILLAGE_S3_ALLOW_HTTP": no}, "/")
    remote = open_remote("s3://bucket", {**env, "TILLAGE_S3_ALLOW_HTTP": "1"}, "/")
    assert isinstance(remote, S3Remote) and remote.location.allow_http
    https = open_remote("s3://bucket", {**ENV, "AWS_ENDPOINT_URL": "https://minio.lan"}, "/")
    assert isinstance(https, S3Remote) and not https.location.allow_http


def test_the_endpoint_comes_from_tillage_then_the_aws_variables() -> None:
    aws = {**ENV, "AWS_ENDPOINT_URL": "https://generic.example"}
    s3_only = {**aws, "AWS_ENDPOINT_URL_S3": "https://s3-only.example"}
    ours = {**s3_only, "TILLAGE_S3_ENDPOINT": "https://ours.example/"}
    assert S3Remote.from_url("s3://bucket", aws).location.endpoint == "https://generic.example"
    assert S3Remote.from_url("s3://bucket", s3_only).location.endpoint == "https://s3-only.example"
    assert S3Remote.from_url("s3://bucket", ours).location.endpoint == "https://ours.example"


def test_without_an_endpoint_it_is_aws_in_the_region_from_the_environment() -> None:
    remote = S3Remote.from_url("s3://bucket/p", {**ENV, "AWS_DEFAULT_REGION": "eu-west-3"})
    assert remote.location.endpoint == "https://bucket.s3.eu-west-3.amazonaws.com"
    assert remote.location.virtual_hosted and remote.location.region == "eu-west-3"
    first = S3Remote.from_url("s3://bucket", {**ENV, "AWS_REGION": "us-west-2"})
    assert first.location.region == "us-west-2"
    dotted = S3Remote.from_url("s3://my.bucket", ENV)  # a dot would break the TLS wildcard
    assert dotted.location.endpoint == "https://s3.us-east-1.amazonaws.com"
    assert not dotted.location.virtual_hosted


@pytest.mark.parametrize(
    "endpoint",
    ["ftp://host", "s3.example.net", "https://", "https://user:pw@host", "https://host:port"],
)
def test_a_malformed_endpoint_is_a_bad_url(endpoint: str) -> None:
    with pytest.raises(BadRemoteUrlError) as caught:
        S3Remote.from_url("s3://bucket", {**ENV, "TILLAGE_S3_ENDPOINT": endpoint})
    assert "pw" not in caught.value.message


def test_missing_credentials_are_told_before_anything_is_sent() -> None:
    with pytest.raises(RemoteUnavailableError) as caught:
        S3Remote.from_url("s3://bucket", {"AWS_ACCESS_KEY_ID": "id-only"})
    assert "AWS_SECRET_ACCESS_KEY" in caught.value.message
    assert "AWS_ACCESS_KEY_ID" not in caught.value.message
    assert "id-only" not in caught.value.message
    with pytest.raises(RemoteUnavailableError) as caught:
        S3Remote.from_url("s3://bucket", {})
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in caught.value.message


def test_no_credential_shows_in_the_remote_or_its_store() -> None:
    secret, token = "very-secret-access-key-1234", "session-token-abcdefgh"
    env = {**ENV, "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token}
    remote = S3Remote.from_url("s3://bucket", env)
    shown = " ".join([repr(remote), str(remote), repr(remote.location), repr(remote._store.config)])
    assert secret not in shown and token not in shown and "id-for-tests" not in shown


def test_the_process_environment_does_not_redirect_a_remote(
    s3_server: MotoServer, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """obstore reads AWS_* from the process itself; the env passed in must win everywhere."""
    for variable, value in {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_ENDPOINT": "http://127.0.0.1:1",
        "AWS_REGION": "eu-north-1",
        "AWS_ACCESS_KEY_ID": "process-key",
        "AWS_SECRET_ACCESS_KEY": "process-secret",
        "AWS_SESSION_TOKEN": "process-token",
        "AWS_ALLOW_HTTP": "false",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true",
    }.items():
        monkeypatch.setenv(variable, value)
    remote = S3Remote.from_url(f"s3://{bucket}", s3_server.env())
    remote.put("config", b"here")
    assert remote.get("config") == b"here"
    assert remote.location.region == "us-east-1"


# -- stores that cannot be used ---------------------------------------------------------------


def test_a_missing_bucket_is_unavailable_for_every_call(s3_server: MotoServer) -> None:
    remote = S3Remote.from_url("s3://tillage-no-such-bucket/p", s3_server.env())
    for what, call in every_call(remote).items():
        error, _ = fails_unavailable(call)
        assert "tillage-no-such-bucket" in error.message and "does not exist" in error.message, what
        assert "aws s3 mb s3://tillage-no-such-bucket" in error.next
        assert error.details["s3_code"] == "NoSuchBucket"
        assert "Debug source" not in error.message


def test_an_endpoint_that_refuses_connections_is_unavailable_quickly() -> None:
    port = free_port()
    env = {**ENV, "TILLAGE_S3_ENDPOINT": f"http://127.0.0.1:{port}", "TILLAGE_S3_ALLOW_HTTP": "1"}
    remote = S3Remote.from_url("s3://bucket", env)
    for what, call in every_call(remote).items():
        error, took = fails_unavailable(call)
        assert took < FAIL_WITHIN, (what, took)
        assert f"cannot reach the S3 endpoint http://127.0.0.1:{port}" in error.message, what
        assert "refused" in error.message.lower(), error.message
        assert "TILLAGE_S3_ENDPOINT" in error.next


def test_an_endpoint_whose_name_does_not_resolve_is_unavailable() -> None:
    env = {**ENV, "TILLAGE_S3_ENDPOINT": "https://no-such-host.invalid"}
    error, took = fails_unavailable(lambda: S3Remote.from_url("s3://bucket", env).get("config"))
    assert "does not resolve" in error.message and took < FAIL_WITHIN


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """An endpoint that accepts connections and never answers (a hung proxy)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    for conn in held:
        conn.close()
    listener.close()


def test_an_endpoint_that_stops_answering_is_unavailable_not_a_hang(
    silent_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta

    monkeypatch.setattr(s3, "READ_TIMEOUT", timedelta(seconds=1))
    monkeypatch.setattr(s3, "RETRY_WINDOW", timedelta(seconds=2))
    env = {**ENV, "TILLAGE_S3_ENDPOINT": silent_endpoint, "TILLAGE_S3_ALLOW_HTTP": "1"}
    remote = S3Remote.from_url("s3://bucket", env)
    for what in ("get", "put", "write_if create"):
        error, took = fails_unavailable(every_call(remote)[what])
        assert took < FAIL_WITHIN, (what, took)
        assert "did not answer in time" in error.message, (what, error.message)


@pytest.fixture(scope="module")
def auth_moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MotoServer, str, str]]:
    """A second moto that checks signatures: its first four actions (unauthenticated) make an
    IAM user with a key and an allow-all policy; everything after must be signed by a key it
    knows. Yields the server, the key id and its secret."""
    boto3 = pytest.importorskip("boto3")
    server = start_moto(
        tmp_path_factory.mktemp("moto-auth"), env={"INITIAL_NO_AUTH_ACTION_COUNT": "4"}
    )
    try:
        iam = boto3.client(
            "iam",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="tillage")
        key = iam.create_access_key(UserName="tillage")["AccessKey"]
        policy = iam.create_policy(
            PolicyName="everything",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                }
            ),
        )
        iam.attach_user_policy(UserName="tillage", PolicyArn=policy["Policy"]["Arn"])
        boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"],
        ).create_bucket(Bucket="tillage-signed")
        yield server, key["AccessKeyId"], key["SecretAccessKey"]
    finally:
        server.stop()


def test_refused_credentials_are_unavailable_and_say_which(
    auth_moto: tuple[MotoServer, str, str],
) -> None:
    server, key_id, secret = auth_moto
    good = server.env(AWS_ACCESS_KEY_ID=key_id, AWS_SECRET_ACCESS_KEY=secret)
    remote = S3Remote.from_url("s3://tillage-signed/p", good)
    remote.put("config", b"signed")
    assert remote.get("config") == b"signed"  # the same store takes the right key

    wrong_secret = S3Remote.from_url(
        "s3://tillage-signed/p", {**good, "AWS_SECRET_ACCESS_KEY": "not-the-secret-at-all"}
    )
    for what, call in every_call(wrong_secret).items():
        error, _ = fails_unavailable(call)
        assert "S3 refused" in error.message, what
        assert "AWS_SECRET_ACCESS_KEY" in error.next
        assert "not-the-secret-at-all" not in error.message
    error, _ = fails_unavailable(lambda: wrong_secret.get("config"))
    assert "secret access key does not match" in error.message

    unknown = S3Remote.from_url(
        "s3://tillage-signed/p", {**good, "AWS_ACCESS_KEY_ID": "AKIANOBODYKNOWS0000"}
    )
    error, _ = fails_unavailable(lambda: unknown.list(""))
    assert "access key id is not one the store knows" in error.message
    assert error.details["s3_code"] == "InvalidAccessKeyId"


# -- conditional writes -----------------------------------------------------------------------

RACER = """
import json, sys
from tillage.remote.url import open_remote

url, env, count = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
who = sys.argv[4]
remote = open_remote(url, env, "/")
sys.stdin.readline()  # go
created = [remote.write_if(f"leases/{i:04d}", who.encode(), None) for i in range(count)]
increments = 0
while increments < count:
    seen = remote.read_versioned("refs/counter")
    value = int(seen.data.split()[0])
    if remote.write_if("refs/counter", f"{value + 1} {who} {increments}".encode(), seen.token):
        increments += 1
print(json.dumps({"created": created, "increments": increments}))
"""


@pytest.mark.process
def test_two_processes_racing_write_if_never_both_win(
    s3_remote: S3Remote, s3_remote_env: Mapping[str, str]
) -> None:
    """Two machines' worth of writers (separate processes, their own connections): each
    create-only name has exactly one winner, and a counter both increment by
    compare-and-swap loses no update."""
    env = json.dumps(dict(s3_remote_env))
    count = 40
    s3_remote.put("refs/counter", b"0 start")
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, s3_remote.url, env, str(count), who],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("a", "b")
    ]
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    results: list[dict[str, Any]] = []
    for racer in racers:
        out, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
        results.append(json.loads(out))
    for i in range(count):
        winners = [who for who, r in zip("ab", results, strict=True) if r["created"][i]]
        assert len(winners) == 1, (i, winners)
        assert s3_remote.get(f"leases/{i:04d}") == winners[0].encode()
    final = s3_remote.get("refs/counter").split()
    assert int(final[0]) == 2 * count  # every win is one increment: none overwrote another


def test_large_bodies_racing_on_one_ref_let_exactly_one_win(
    s3_remote: S3Remote, s3_remote_env: Mapping[str, str]
) -> None:
    """The case moto itself gets wrong without serialized writes (s3_server.py): bodies large
    enough that the server's check and its store are far apart (against plain moto_server,
    8 MiB bodies gave two or more winners in 2 of 10 create rounds, 4 of 10 replace rounds)."""
    writers = [open_remote(s3_remote.url, s3_remote_env, "/") for _ in range(4)]
    try:
        body = os.urandom(8 << 20)
        for round_ in range(5):
            created = f"leases/{round_:02d}"
            wins = race_write_if(writers, created, body, None)
            assert wins.count(True) == 1, ("create", round_, wins)
            assert s3_remote.get(created)[-1] == wins.index(True)

            replaced = f"refs/{round_:02d}"
            s3_remote.put(replaced, b"base")
            seen = s3_remote.read_versioned(replaced)
            assert seen is not None
            wins = race_write_if(writers, replaced, body, seen.token)
            assert wins.count(True) == 1, ("replace", round_, wins)
            assert s3_remote.get(replaced)[-1] == wins.index(True)
    finally:
        for writer in writers:
            writer.close()


def race_write_if(writers: list[Remote], name: str, body: bytes, expect: str | None) -> list[bool]:
    """Has every writer `write_if(name, body + its index, expect)` at once (threads released
    together); returns who won, in order."""
    barrier = threading.Barrier(len(writers))
    answers = [False] * len(writers)

    def work(i: int) -> None:
        barrier.wait(timeout=60)
        answers[i] = writers[i].write_if(name, body + bytes([i]), expect)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), "a writer of the race did not finish"
    return answers


class FlakyPut:
    """Stands in for obstore.put: for conditional writes, runs `before` (and the real put
    when `land` says so) and then raises `error`, `times` times; everything else is real."""

    def __init__(
        self,
        error: Exception,
        *,
        times: int = 1,
        land: bool = False,
        before: Callable[[], object] | None = None,
    ) -> None:
        self.real = obstore.put
        self.error, self.times, self.land, self.before = error, times, land, before
        self.conditional_calls = 0

    def __call__(self, store: Any, path: str, data: Any, **kwargs: Any) -> Any:
        if kwargs.get("mode") in (None, "overwrite"):
            return self.real(store, path, data, **kwargs)
        self.conditional_calls += 1
        if self.conditional_calls <= self.times:
            if self.before is not None:
                self.before()
            if self.land:
                self.real(store, path, data, **kwargs)
            raise self.error
        return self.real(store, path, data, **kwargs)


def server_error(status: str, code: str = "") -> GenericError:
    body = f"<Error><Code>{code}</Code></Error>" if code else ""
    return GenericError(
        f"Generic S3 error: Error performing PUT http://x/y - Server returned non-2xx status "
        f"code: {status}: {body}"
    )


def test_a_write_that_landed_but_whose_reply_was_lost_is_a_win(
    s3_remote: S3Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_remote.check_conditional_writes()  # this process's probe, before the faults
    flaky = FlakyPut(server_error("500 Internal Server Error", "InternalError"), land=True)
    monkeypatch.setattr(obstore, "put", flaky)
    assert s3_remote.write_if("refs/aa", b"mine, sealed with a fresh nonce", None) is True
    assert flaky.conditional_calls == 2  # the retry lost to our own landed write
    seen = s3_remote.read_versioned("refs/aa")
    assert seen is not None
    flaky.conditional_calls = 0
    assert s3_remote.write_if("refs/aa", b"mine again, another nonce", seen.token) is True
    assert s3_remote.get("refs/aa") == b"mine again, another nonce"


def test_a_write_whose_reply_was_lost_while_another_won_is_a_loss(
    s3_remote: S3Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_remote.put("refs/aa", b"base")
    seen = s3_remote.read_versioned("refs/aa")
    assert seen is not None
    flaky = FlakyPut(
        server_error("503 Slow Down", "SlowDown"),
        before=lambda: s3_remote.put("refs/aa", b"the other machine's head"),
    )
    monkeypatch.setattr(obstore, "put", flaky)
    assert s3_remote.write_if("refs/aa", b"mine", seen.token) is False
    assert s3_remote.get("refs/aa") == b"the other machine's head"


def test_a_conflict_between_concurrent_conditional_writes_is_retried(
    s3_remote: S3Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_remote.check_conditional_writes()  # this process's probe, before the faults
    flaky = FlakyPut(server_error("409 Conflict", "ConditionalRequestConflict"), times=2)
    monkeypatch.setattr(obstore, "put", flaky)
    assert s3_remote.write_if("leases/aa", b"held", None) is True
    assert flaky.conditional_calls == 3
    assert s3_remote.get("leases/aa") == b"held"


def test_a_conditional_write_that_keeps_failing_is_unavailable(
    s3_remote: S3Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky = FlakyPut(server_error("500 Internal Server Error", "InternalError"), times=99)
    monkeypatch.setattr(obstore, "put", flaky)
    error, _ = fails_unavailable(lambda: s3_remote.write_if("leases/aa", b"held", None))
    assert flaky.conditional_calls == s3.CONDITIONAL_ATTEMPTS
    assert "HTTP 500 InternalError" in error.message
    refused = FlakyPut(server_error("403 Forbidden", "AccessDenied"), times=99)
    monkeypatch.setattr(obstore, "put", refused)
    error, _ = fails_unavailable(lambda: s3_remote.write_if("leases/aa", b"held", None))
    assert refused.conditional_calls == 1  # a refusal is not retried
    assert "AccessDenied" in error.message
    with pytest.raises(RemoteMissingError):
        s3_remote.get("leases/aa")


def test_moto_enforces_conditional_writes_by_the_probe(s3_remote: S3Remote) -> None:
    s3_remote.check_conditional_writes()
    assert s3_remote.list("") == []  # the probe cleans up after itself


def test_a_store_that_ignores_conditional_writes_is_told(
    s3_remote: S3Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = obstore.put

    def ignoring(store: Any, path: str, data: Any, **kwargs: Any) -> Any:
        kwargs.pop("mode", None)  # what s3rver does with If-None-Match and If-Match
        return real(store, path, data, **kwargs)

    monkeypatch.setattr(obstore, "put", ignoring)
    error, _ = fails_unavailable(s3_remote.check_conditional_writes)
    assert "does not enforce conditional writes" in error.message
    assert s3_remote.list("") == []


# -- listing, existence, size -----------------------------------------------------------------


def test_exists_finishes_with_heads_when_the_range_is_too_large_to_list(
    s3_remote: S3Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"objects/{i:02x}/{i:02x}{j:04d}" for i in range(0, 256, 8) for j in range(40)]
    for name in names:
        s3_remote.put(name, b"")
    asked = [f"objects/{i:02x}/{i:02x}{j:04d}" for i in range(0, 256, 4) for j in (0, 39, 40)]
    expected = {name for name in asked if name in set(names)}
    assert s3_remote.exists(asked) == expected  # listed: the range is within the budget

    heads: list[str] = []
    real_head = obstore.head

    def counting_head(store: Any, path: str) -> Any:
        heads.append(path)
        return real_head(store, path)

    monkeypatch.setattr(obstore, "head", counting_head)
    monkeypatch.setattr(s3, "LIST_KEYS_PER_NAME", 1)
    monkeypatch.setattr(s3, "LIST_PAGE", 50)
    assert s3_remote.exists(asked) == expected
    assert heads, "the listing stopped early: the rest were asked by HEAD"
    assert len(heads) < len(asked), "the names the listing reached were not asked again"
    assert all(name > min(heads) or name in asked for name in heads)


def test_list_returns_only_this_remotes_names(s3_server: MotoServer, bucket: str) -> None:
    remote = S3Remote.from_url(f"s3://{bucket}/team/a", s3_server.env())
    raw = s3_server.raw_store(bucket)
    for key in ("team/a/config", "team/a/refs/aa", "team/ab/config", "team/config", "README"):
        obstore.put(raw, key, b"x")
    obstore.put(raw, "team/a/Notes.TXT", b"not a name tillage makes")
    assert remote.list("") == ["config", "refs/aa"]
    assert remote.exists(["config", "refs/aa", "refs/ab"]) == {"config", "refs/aa"}
    whole = S3Remote.from_url(f"s3://{bucket}", s3_server.env())
    assert whole.list("team/a") == ["team/a/config", "team/a/refs/aa", "team/ab/config"]
    assert whole.get("team/a/refs/aa") == b"x"


def test_a_64_mib_object_goes_up_in_parts_and_comes_back_whole(s3_remote: S3Remote) -> None:
    data = os.urandom(64 << 20)
    started = time.monotonic()
    s3_remote.put("objects/ff/big", data)
    put_took = time.monotonic() - started
    seen = s3_remote.read_versioned("objects/ff/big")
    assert seen is not None and seen.data == data
    assert seen.token.strip('"').endswith(f"-{64 // 8}")  # a multipart ETag: 8 parts of 8 MiB
    assert s3_remote.exists(["objects/ff/big"]) == {"objects/ff/big"}
    assert put_took < 120
    small = os.urandom(s3.MULTIPART_ABOVE)
    s3_remote.put("objects/ff/at-the-limit", small)
    at_limit = s3_remote.read_versioned("objects/ff/at-the-limit")
    assert at_limit is not None and "-" not in at_limit.token  # one PUT up to the limit
    assert at_limit.data == small
