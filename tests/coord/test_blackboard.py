"""`till coord write | read | list`: a family's blackboard, seen at once by a workspace, its
forks and forks of forks; each write sealed with its owner and kept in the key's history;
bad keys, sizes and sources refused with nothing written."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from blake3 import blake3

import tillage.agent
from tests.conftest import Till
from tillage.features.coord import keys
from tillage.verbs import coord as coord_verbs

ENTRY_FIELDS = {"path", "owner", "written_at", "size", "digest", "version", "workspace"}
MAX = 1 << 20


@pytest.fixture
def attached(till: Till, folder: Path) -> Path:
    (folder / "app.py").write_text("print('v1')\n")
    till.json("watch", "--no-daemon")
    return folder


def _write(till: Till, key: str, *args: str, cwd: Path | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = till.json("coord", "write", key, *args, cwd=cwd)
    return doc


def _read(till: Till, key: str, *args: str, cwd: Path | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = till.json("coord", "read", key, *args, cwd=cwd)
    return doc


def _fork(till: Till, name: str, cwd: Path | None = None) -> Path:
    return Path(till.json("fork", name, cwd=cwd)["fork"]["path"])


def _listed(till: Till, cwd: Path | None = None) -> list[str]:
    return [e["path"] for e in till.json("coord", "list", cwd=cwd)["entries"]]


def test_a_value_written_in_the_workspace_is_read_in_a_fork_and_in_a_forks_fork(
    till: Till, attached: Path
) -> None:
    fork = _fork(till, "alpha")
    inner = _fork(till, "inner", cwd=fork)
    written = _write(till, "plan", "--value", "step one\n", "--owner", "lead")

    assert set(written) == ENTRY_FIELDS
    assert written["path"] == "plan" and written["owner"] == "lead"
    assert written["size"] == len(b"step one\n")
    assert written["digest"] == blake3(b"step one\n").hexdigest()
    assert written["version"] == 1 and written["workspace"] == str(attached)
    for where in (attached, fork, inner):
        doc = _read(till, "plan", cwd=where)
        assert doc["value"] == "step one\n" and doc["value_base64"] is None
        assert {k: doc[k] for k in ENTRY_FIELDS} == written
        assert _listed(till, cwd=where) == ["plan"]


def test_a_value_written_in_a_forks_fork_is_read_in_the_fork_and_the_workspace(
    till: Till, attached: Path
) -> None:
    fork = _fork(till, "alpha")
    inner = _fork(till, "inner", cwd=fork)
    _fork(till, "sibling")
    written = _write(till, "results/inner", "--value", "done", "--owner", "child", cwd=inner)
    assert written["workspace"] == str(inner)
    for where in (attached, fork, attached.parent / f"{attached.name}.forks" / "sibling"):
        assert _read(till, "results/inner", cwd=where)["value"] == "done"
    # A later write from the root replaces it for everyone.
    _write(till, "results/inner", "--value", "seen", "--owner", "lead")
    assert _read(till, "results/inner", cwd=inner)["value"] == "seen"


def test_another_family_does_not_see_the_value(till: Till, attached: Path, user_home: Path) -> None:
    _write(till, "plan", "--value", "ours", "--owner", "lead")
    other = user_home / "other"
    other.mkdir()
    (other / "b.txt").write_text("b")
    till.json("watch", "--no-daemon", cwd=other)
    assert _listed(till, cwd=other) == []
    run = till("--json", "coord", "read", "plan", cwd=other)
    assert run.code == 1 and run.error["name"] == "coord.not_found"


def test_each_write_is_kept_in_the_keys_history_with_its_owner_time_size_and_digest(
    till: Till, attached: Path
) -> None:
    fork = _fork(till, "alpha")
    first = till.json(
        "coord",
        "write",
        "plan",
        "--value",
        "one",
        "--owner",
        "lead",
        env={"TILLAGE_NOW": "2030-01-01T00:00:00Z"},
    )
    assert first["written_at"] == "2030-01-01T00:00:00.000000Z"
    second = _write(till, "plan", "--value", "second value", "--owner", "child", cwd=fork)
    assert second["version"] == 2

    doc = _read(till, "plan", "--history")
    assert doc["owner"] == "child" and doc["value"] == "second value"
    assert doc["history"] == [second, first]  # newest first, each write whole
    assert [h["version"] for h in _read(till, "plan", "--history", "-n", "1")["history"]] == [2]
    assert _read(till, "plan")["history"] is None


def test_the_owner_is_tillage_agent_unless_given_and_a_write_needs_one(
    till: Till, attached: Path
) -> None:
    doc = till.json("coord", "write", "k", "--value", "v", env={"TILLAGE_AGENT": "agent-7"})
    assert doc["owner"] == "agent-7"
    given = till.json(
        "coord", "write", "k", "--value", "v", "--owner", "me", env={"TILLAGE_AGENT": "agent-7"}
    )
    assert given["owner"] == "me"
    for bad in ((), ("--owner", "  "), ("--owner", "a\x1bb"), ("--owner", "x" * 201)):
        run = till("--json", "coord", "write", "k2", "--value", "v", *bad)
        assert run.code == 1 and run.error["name"] == "coord.bad_owner", (bad, run.stdout)
    assert _listed(till) == ["k"]


def test_a_value_comes_from_a_file_or_stdin_byte_for_byte(till: Till, attached: Path) -> None:
    blob = bytes(range(256)) * 8
    (attached / "blob.bin").write_bytes(blob)
    doc = _write(till, "blob", "--file", "blob.bin", "--owner", "a")
    assert doc["digest"] == blake3(blob).hexdigest() and doc["size"] == len(blob)
    read = _read(till, "blob")
    assert read["value"] is None and base64.b64decode(read["value_base64"]) == blob
    # Without --json, read prints the value's bytes as they are.
    proc = subprocess.run(
        [sys.executable, "-m", "tillage", "coord", "read", "blob"],
        cwd=attached,
        env=till.env(),
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0 and proc.stdout == blob

    text = "line one\nline two\n"
    piped = till("--json", "coord", "write", "notes", "--owner", "a", stdin=text)
    assert piped.code == 0, piped.stdout
    assert _read(till, "notes")["value"] == text
    proc = subprocess.run(
        [sys.executable, "-m", "tillage", "--json", "coord", "write", "raw", "--owner", "a"],
        cwd=attached,
        env=till.env(),
        input=blob,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout
    assert json.loads(proc.stdout)["digest"] == blake3(blob).hexdigest()


def test_an_empty_value_is_written_only_when_given_as_one(till: Till, attached: Path) -> None:
    run = till("--json", "coord", "write", "k", "--owner", "a", stdin="")
    assert run.code == 1 and run.error["name"] == "coord.bad_value"
    assert _listed(till) == []
    doc = _write(till, "k", "--value", "", "--owner", "a")
    assert doc["size"] == 0 and _read(till, "k")["value"] == ""


def test_two_sources_or_an_unreadable_file_are_refused(till: Till, attached: Path) -> None:
    (attached / "f.txt").write_text("x")
    for args in (
        ("--value", "v", "--file", "f.txt"),
        ("--file", "missing.txt"),
        ("--file", "."),
    ):
        run = till("--json", "coord", "write", "k", "--owner", "a", *args)
        assert run.code == 1 and run.error["name"] == "coord.bad_value", (args, run.stdout)
    assert _listed(till) == []


@pytest.mark.parametrize(
    "key",
    [
        "/plan",
        "a/../b",
        "..",
        ".",
        "a/./b",
        "a//b",
        "a/",
        "with space",
        "naïve",
        "semi;colon",
        "back\\slash",
        "x" * 201,
    ],
)
def test_a_key_that_is_no_name_is_an_invalid_argument_and_writes_nothing(
    till: Till, attached: Path, key: str
) -> None:
    run = till("--json", "coord", "write", key, "--value", "v", "--owner", "a")
    assert run.code == 1 and run.error["code"] == -32066, run.stdout
    assert run.error["name"] == "coord.invalid_key"
    assert _listed(till) == []
    read = till("--json", "coord", "read", key)
    assert read.code == 1 and read.error["name"] == "coord.invalid_key"


def test_an_empty_key_is_an_invalid_argument(till: Till, attached: Path) -> None:
    run = till("--json", "coord", "write", "", "--value", "v", "--owner", "a")
    assert run.code == 1 and run.error["name"] == "coord.invalid_key"


def test_a_key_of_the_longest_length_and_every_allowed_character_is_one(
    till: Till, attached: Path
) -> None:
    longest = "a" * 200
    for key in (longest, "Tasks/42:result/v1.2_final-x", "..a/b.."):
        assert _write(till, key, "--value", key, "--owner", "a")["path"] == key
        assert _read(till, key)["value"] == key


def test_a_value_over_one_mib_is_refused_with_the_limit_and_writes_nothing(
    till: Till, attached: Path
) -> None:
    assert _write(till, "max", "--value", "x" * MAX, "--owner", "a")["size"] == MAX
    run = till("--json", "coord", "write", "big", "--value", "x" * (MAX + 1), "--owner", "a")
    assert run.code == 1 and run.error["code"] == -32167, run.stdout[:500]
    assert run.error["name"] == "coord.too_big"
    assert run.error["details"] == {"limit": MAX, "size": MAX + 1}
    assert "1048576" in run.error["message"]
    (attached / "big.bin").write_bytes(b"y" * (3 * MAX))
    run = till("--json", "coord", "write", "big", "--file", "big.bin", "--owner", "a")
    assert run.code == 1 and run.error["details"]["size"] == 3 * MAX
    proc = subprocess.run(
        [sys.executable, "-m", "tillage", "--json", "coord", "write", "big", "--owner", "a"],
        cwd=attached,
        env=till.env(),
        input=b"z" * (2 * MAX),
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 1
    error = json.loads(proc.stdout)["error"]
    assert error["name"] == "coord.too_big" and "more than" in error["message"]
    assert _listed(till) == ["max"]


def test_reading_a_key_never_written_is_not_found(till: Till, attached: Path) -> None:
    run = till("--json", "coord", "read", "nothing/here")
    assert run.code == 1 and run.error["code"] == -32061
    assert run.error["name"] == "coord.not_found"
    assert "till coord list" in run.error["next"]
    history = till("--json", "coord", "read", "nothing/here", "--history")
    assert history.error["name"] == "coord.not_found"


def test_list_shows_each_key_as_last_written_by_key_and_filters_by_prefix(
    till: Till, attached: Path
) -> None:
    assert _listed(till) == []
    for key in ("tasks/2", "plan", "tasks/1"):
        _write(till, key, "--value", key, "--owner", "a")
    _write(till, "tasks/1", "--value", "again", "--owner", "b")
    entries = till.json("coord", "list")["entries"]
    assert [e["path"] for e in entries] == ["plan", "tasks/1", "tasks/2"]
    assert set(entries[1]) == ENTRY_FIELDS
    assert entries[1]["owner"] == "b" and entries[1]["version"] == 2
    tasks = till.json("coord", "list", "tasks/")["entries"]
    assert [e["path"] for e in tasks] == ["tasks/1", "tasks/2"]


def test_human_output_names_the_key_its_size_and_owner(till: Till, attached: Path) -> None:
    wrote = till("coord", "write", "plan", "--value", "abc", "--owner", "lead")
    assert wrote.code == 0, wrote.stderr
    assert "plan" in wrote.stdout and "3 B" in wrote.stdout and "lead" in wrote.stdout
    listed = till("coord", "list")
    assert "plan" in listed.stdout and "lead" in listed.stdout
    history = till("coord", "read", "plan", "--history")
    assert history.stdout.startswith("v1  ") and "lead" in history.stdout


def test_a_value_changed_outside_tillage_is_refused_as_damaged(till: Till, attached: Path) -> None:
    _write(till, "plan", "--value", "original", "--owner", "a")
    [stored] = (till.home / "coord").glob("*/*.value")
    stored.write_bytes(stored.read_bytes().replace(b"original", b"origin4l"))
    run = till("--json", "coord", "read", "plan")
    assert run.code == 1 and run.error["code"] == -32067
    assert run.error["name"] == "coord.damaged"


def test_a_write_cut_before_its_history_line_is_whole_in_the_history_after(
    till: Till, attached: Path
) -> None:
    """A crash between the value's replace and the history's append, and a crash in the
    middle of the append: readers show every write, and the next write mends the file."""
    _write(till, "plan", "--value", "one", "--owner", "a")
    second = _write(till, "plan", "--value", "two", "--owner", "b")
    [history] = (till.home / "coord").glob("*/*.history")
    lines = history.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    history.write_bytes(lines[0] + lines[1][:25])  # the second append cut mid-line

    shown = _read(till, "plan", "--history")["history"]
    assert [h["version"] for h in shown] == [2, 1]
    assert shown[0] == second  # the value's own entry stands in for the cut line

    third = _write(till, "plan", "--value", "three", "--owner", "c")
    assert third["version"] == 3
    mended = [json.loads(line) for line in history.read_bytes().splitlines()]
    assert [e["version"] for e in mended] == [1, 2, 3]
    assert [e["owner"] for e in mended] == ["a", "b", "c"]


CONCURRENT_WRITER = """
import sys
from pathlib import Path
import tillage.api

home, folder, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for n in range(count):
    value = (f"{name}:{n}:".encode() * 40000)[: 300_000 + n]
    tillage.api.call("coord.write", home=Path(home), folder=Path(folder), path="shared",
                     value=value, owner=name)
print("done")
"""


def test_concurrent_writers_in_two_processes_leave_a_whole_value_and_every_write_in_history(
    till: Till, attached: Path
) -> None:
    import tillage.api

    fork = _fork(till, "alpha")
    count = 25
    expected = {
        hashlib.sha256((f"{name}:{n}:".encode() * 40000)[: 300_000 + n]).hexdigest()
        for name in ("left", "right")
        for n in range(count)
    }
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_WRITER, str(till.home), str(where), name, str(count)],
            env=till.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name, where in (("left", attached), ("right", fork))
    ]
    reads = 0
    try:
        while any(w.poll() is None for w in writers):
            try:
                result = tillage.api.call(
                    "coord.read", home=till.home, folder=attached, path="shared"
                )
            except Exception as exc:  # nothing written yet is the one answer allowed
                assert getattr(exc, "name", "") == "coord.not_found", exc
                continue
            data = base64.b64decode(result.value_base64) if result.value is None else None
            value = data if data is not None else result.value.encode()
            assert hashlib.sha256(value).hexdigest() in expected  # one whole write, never torn
            reads += 1
    finally:
        outputs = [w.communicate(timeout=300) for w in writers]
    for w, (out, err) in zip(writers, outputs, strict=True):
        assert w.returncode == 0 and out.strip() == b"done", err.decode()[-2000:]
    history = tillage.api.call(
        "coord.read", home=till.home, folder=fork, path="shared", history=True, limit=1000
    ).history
    assert sorted(h.version for h in history) == list(range(1, 2 * count + 1))
    assert {h.owner for h in history} == {"left", "right"}
    assert reads > 0


def test_the_blackboard_verbs_are_tools_for_a_model(till: Till, attached: Path) -> None:
    tillage.agent.forget()
    tools = {t.name: t for t in tillage.agent.tools(attached, home=till.home)}
    write, read, listing = (
        tools["workspace_coord_write"],
        tools["workspace_coord_read"],
        tools["workspace_coord_list"],
    )
    assert write.annotations["readOnlyHint"] is False and read.annotations["readOnlyHint"]
    assert {"path", "value", "owner"} <= set(write.input_schema["properties"])

    done = write.call({"path": "plan", "value": "from a model", "owner": "model"})
    assert not done.is_error, done.text
    assert done.document["owner"] == "model"
    got = read.call({"path": "plan"})
    assert got.document["value"] == "from a model"
    assert [e["path"] for e in listing.call({}).document["entries"]] == ["plan"]
    nothing = write.call({"path": "plan2", "owner": "model"})
    assert nothing.is_error and nothing.document["error"]["name"] == "coord.bad_value"
    bad = write.call({"path": "../escape", "value": "x", "owner": "model"})
    assert bad.is_error and bad.document["error"]["name"] == "coord.invalid_key"


def test_the_verbs_limit_is_the_blackboards() -> None:
    assert coord_verbs.MAX_VALUE == keys.MAX_VALUE == MAX


def test_verify_removes_a_killed_writers_temporary_value_and_keeps_the_value(
    till: Till, attached: Path
) -> None:
    import os

    _write(till, "plan", "--value", "kept", "--owner", "a")
    [stored] = (till.home / "coord").glob("*/*.value")
    stale = stored.parent / f".{stored.name}.tillage-tmp-1a2b"
    fresh = stored.parent / f".{stored.name}.tillage-tmp-3c4d"
    stale.write_bytes(b"half a value")
    fresh.write_bytes(b"a live write's")
    os.utime(stale, (0, 0))
    assert till.json("verify")["ok"] is True
    assert not stale.exists(), "a temporary file older than any live write is removed"
    assert fresh.exists(), "a fresh one may be a live writer's, about to be renamed"
    assert _read(till, "plan")["value"] == "kept"
    assert _listed(till) == ["plan"]
