"""The SSH remote's framed protocol and its far side, over plain pipes (no sshd): frames are
bounded, a broken or silent stream is an error with a deadline, and `till remote-serve
--stdio` keeps stdout for frames alone."""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tillage.remote.serve import serve
from tillage.remote.wire import (
    MAX_HEADER,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    Channel,
    FrameError,
    PeerClosedError,
    PeerTimeoutError,
    join_names,
    split_names,
)

pytestmark = pytest.mark.process  # real `till` processes, daemons or servers


@dataclass
class Pipe:
    """Two ends: `channel` reads what `raw_w` writes, and writes into `raw_r`."""

    channel: Channel
    raw_w: int
    raw_r: int


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    yield Pipe(Channel(a_r, b_w), a_w, b_r)
    for fd in (a_r, a_w, b_r, b_w):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_a_frame_round_trips_with_its_payload(pipe: Pipe) -> None:
    other = Channel(pipe.raw_r, pipe.raw_w)
    other.send({"op": "put", "name": "config"}, b"\x00\xff" * 10, timeout=1)
    header, payload = pipe.channel.receive(timeout=1)
    assert header == {"op": "put", "name": "config", "len": 20}
    assert payload == b"\x00\xff" * 10


def test_an_oversize_header_length_is_refused_before_it_is_read(pipe: Pipe) -> None:
    os.write(pipe.raw_w, b"Welcome to the far side!\n")  # a login banner: 'Welc' is 1.4 GB
    began = time.monotonic()
    with pytest.raises(FrameError, match="not a frame: 'Welcome to the far side"):
        pipe.channel.receive(timeout=5)
    assert time.monotonic() - began < 1


def test_a_payload_over_the_limit_is_refused_before_it_is_read(pipe: Pipe) -> None:
    text = json.dumps({"ok": True, "len": MAX_PAYLOAD + 1}).encode()
    os.write(pipe.raw_w, struct.pack(">I", len(text)) + text)
    with pytest.raises(FrameError, match="over 67108864"):
        pipe.channel.receive(timeout=5)


@pytest.mark.parametrize("text", [b"[1, 2]", b"{not json", b"\xff\xfe"])
def test_a_header_that_is_not_a_json_object_is_a_frame_error(pipe: Pipe, text: bytes) -> None:
    os.write(pipe.raw_w, struct.pack(">I", len(text)) + text)
    with pytest.raises(FrameError):
        pipe.channel.receive(timeout=5)


def test_a_header_over_64_kib_is_never_sent(pipe: Pipe) -> None:
    with pytest.raises(ValueError, match="over"):
        pipe.channel.send({"op": "x", "pad": "a" * MAX_HEADER}, timeout=1)


def test_a_stream_that_ends_mid_frame_is_not_a_clean_end(pipe: Pipe) -> None:
    text = json.dumps({"ok": True, "len": 10}).encode()
    os.write(pipe.raw_w, struct.pack(">I", len(text)) + text + b"12345")
    os.close(pipe.raw_w)
    with pytest.raises(PeerClosedError) as caught:
        pipe.channel.receive(timeout=5)
    assert not caught.value.clean


def test_a_stream_that_ends_between_frames_is_a_clean_end(pipe: Pipe) -> None:
    os.close(pipe.raw_w)
    with pytest.raises(PeerClosedError) as caught:
        pipe.channel.receive(timeout=5)
    assert caught.value.clean


def test_silence_is_a_timeout_not_a_hang(pipe: Pipe) -> None:
    began = time.monotonic()
    with pytest.raises(PeerTimeoutError, match=r"0\.3 s"):
        pipe.channel.receive(timeout=0.3)
    assert 0.25 < time.monotonic() - began < 3


def test_a_reader_that_stopped_reading_times_the_writer_out(pipe: Pipe) -> None:
    with pytest.raises(PeerTimeoutError):
        pipe.channel.send({"op": "put"}, b"x" * (8 * 1024 * 1024), timeout=0.3)


def test_names_travel_one_a_line() -> None:
    names = ["objects/ab/abcd", "config", "refs/x"]
    assert split_names(join_names(names)) == names
    assert split_names(join_names([])) == []


@dataclass
class Server:
    channel: Channel
    thread: threading.Thread
    status: list[int]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """serve() on a folder in a thread, and the client's end of its pipes."""
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    status: list[int] = []
    thread = threading.Thread(
        target=lambda: status.append(serve(req_r, rep_w, str(tmp_path / "root"))), daemon=True
    )
    thread.start()
    yield Server(Channel(rep_r, req_w), thread, status)
    for fd in (req_w, rep_r):
        with contextlib.suppress(OSError):
            os.close(fd)
    thread.join(5)
    for fd in (req_r, rep_w):
        with contextlib.suppress(OSError):
            os.close(fd)


def _ask(server: Server, header: dict[str, object], payload: bytes = b"") -> dict[str, object]:
    server.channel.send(header, payload, timeout=5)
    reply, _ = server.channel.receive(timeout=5)
    return reply


def test_the_far_side_answers_nothing_before_the_handshake(server: Server) -> None:
    reply = _ask(server, {"op": "exists"}, b"config")
    assert reply["error"] == {"kind": "protocol", "message": "'exists' before the handshake"}


def test_the_far_side_refuses_another_protocol_version_and_says_its_own(server: Server) -> None:
    reply = _ask(server, {"op": "hello", "version": PROTOCOL_VERSION + 1})
    error = reply["error"]
    assert isinstance(error, dict)
    assert error["kind"] == "version" and error["version"] == PROTOCOL_VERSION


def test_the_far_side_answers_a_bad_request_and_keeps_serving(
    server: Server, tmp_path: Path
) -> None:
    assert _ask(server, {"op": "hello", "version": PROTOCOL_VERSION})["ok"] is True
    assert not (tmp_path / "root").exists()  # not made at the handshake, nor by a read
    assert _ask(server, {"op": "frobnicate"})["error"] == {
        "kind": "protocol",
        "message": "unknown operation 'frobnicate'",
    }
    invalid = _ask(server, {"op": "get", "name": "../escape"})["error"]
    assert isinstance(invalid, dict) and invalid["kind"] == "invalid_name"
    missing = _ask(server, {"op": "get", "name": "config"})["error"]
    assert isinstance(missing, dict) and missing["kind"] == "missing"
    assert missing["name"] == "config"
    assert not (tmp_path / "root").exists()
    assert _ask(server, {"op": "put", "name": "config"}, b"c") == {"ok": True}  # made by it
    assert (tmp_path / "root" / "config").read_bytes() == b"c"


def test_the_far_side_ends_cleanly_at_end_of_input(server: Server) -> None:
    assert _ask(server, {"op": "hello", "version": PROTOCOL_VERSION})["ok"] is True
    os.close(server.channel.out_fd)
    server.thread.join(5)
    assert server.status == [0]


def test_the_far_side_answers_junk_with_an_error_and_leaves(server: Server) -> None:
    os.write(server.channel.out_fd, b"GET / HTTP/1.1\r\n\r\n")
    reply, _ = server.channel.receive(timeout=5)
    error = reply["error"]
    assert isinstance(error, dict) and error["kind"] == "protocol"
    server.thread.join(5)
    assert server.status == [1]


def test_a_long_list_is_answered_in_several_frames(server: Server) -> None:
    from tillage.remote import serve as serve_module

    assert _ask(server, {"op": "hello", "version": PROTOCOL_VERSION})["ok"] is True
    names = [f"objects/{i:04x}/{'a' * 200}" for i in range(300)]
    for name in names:
        assert _ask(server, {"op": "put", "name": name}, b"") == {"ok": True}
    old = serve_module.LIST_FRAME
    serve_module.LIST_FRAME = 8 * 1024  # ~38 names a frame
    try:
        server.channel.send({"op": "list", "prefix": "objects/"}, timeout=5)
        frames = []
        while True:
            reply, payload = server.channel.receive(timeout=5)
            frames.append(split_names(payload))
            if not reply["more"]:
                break
    finally:
        serve_module.LIST_FRAME = old
    assert len(frames) > 5
    assert [n for frame in frames for n in frame] == sorted(names)


def _till() -> list[str]:
    return [sys.executable, "-m", "tillage"]


def test_till_remote_serve_keeps_stdout_for_frames_alone(tmp_path: Path) -> None:
    """The real command: a conversation, then end of input; every stdout byte is a frame."""
    root = tmp_path / "served"
    frames = b""
    for header, payload in (
        ({"op": "hello", "version": PROTOCOL_VERSION}, b""),
        ({"op": "put", "name": "config", "len": 3}, b"abc"),
        ({"op": "get", "name": "config"}, b""),
        ({"op": "exists", "len": 13}, b"config\nrefs/x"),
    ):
        text = json.dumps(header).encode()
        frames += struct.pack(">I", len(text)) + text + payload
    env = {**os.environ, "TILLAGE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [*_till(), "remote-serve", "--stdio", str(root)],
        input=frames,
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out, replies = proc.stdout, []
    while out:
        (size,) = struct.unpack(">I", out[:4])
        header = json.loads(out[4 : 4 + size])
        length = header.get("len", 0)
        replies.append((header, out[4 + size : 4 + size + length]))
        out = out[4 + size + length :]
    assert [h.get("ok") for h, _ in replies] == [True, True, True, True]
    assert replies[2][1] == b"abc"
    assert replies[3][1] == b"config"
    assert (root / "config").read_bytes() == b"abc"


def test_till_remote_serve_without_stdio_says_what_it_would_serve(tmp_path: Path) -> None:
    env = {**os.environ, "TILLAGE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [*_till(), "--json", "remote-serve", "sub/dir"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "path": str(tmp_path / "sub" / "dir"),
        "protocol": PROTOCOL_VERSION,
        "serving": False,
    }
    assert not (tmp_path / "sub").exists()  # nothing is made until it serves
