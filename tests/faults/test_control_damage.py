"""A damaged control file of the store or of a folder's `.tillage/` (issue 23, item 7): every
command answers a public error whose next step is a command that works (never `internal`),
`verify --repair` rebuilds what can be rebuilt and sets aside what it cannot, saying which,
and the agent seam's detection never raises."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tillage.agent
from tests.conftest import Run, Till
from tillage.verbs.invoke import Settings
from tillage.verbs.tools import Toolbelt

CONTROL_DAMAGED = -32113
STORE_DAMAGED = -32067


def _write(data: bytes) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        if path.is_dir():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return damage


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _folder(path: Path) -> None:
    """A folder in the file's place (what root cannot read through, where chmod 000 would
    not stop it), holding something so nothing can simply remove it."""
    if path.exists():
        path.unlink()
    path.mkdir(parents=True)
    (path / "x").write_text("x\n")


DAMAGES: dict[str, Callable[[Path], None]] = {
    "garbage": _write(b"garbage"),
    "not_utf8": _write(b"\xff\xfe\x00\x9c{"),
    "list": _write(b"[]"),
    "empty_object": _write(b"{}"),
    "string": _write(b'"x"'),
    "null": _write(b"null"),
    "number": _write(b"7"),
    "empty": _write(b""),
    "truncated": _truncate,
    "folder": _folder,
}


@pytest.fixture(autouse=True)
def fresh_presence() -> Any:
    tillage.agent.forget()
    yield
    tillage.agent.forget()


@pytest.fixture
def sealed(till: Till, folder: Path) -> list[str]:
    """An attached folder with two snapshots (oldest first), no watcher."""
    (folder / "app.py").write_text("print('v1')\n")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    (folder / "app.py").write_text("print('v2')\n")
    second = till.json("snap", "-m", "second")["snapshot"]["id"]
    return [first, second]


def _refused(run: Run, code: int = CONTROL_DAMAGED) -> dict[str, Any]:
    """The run answered a public error with `code` (exit 1, one envelope, no traceback)."""
    assert run.code == 1, (run.code, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    error = run.error
    assert error["code"] == code, error
    assert error["name"] != "internal"
    assert "till verify --repair" in error["next"], error
    return error


def _verify(till: Till, *args: str) -> dict[str, Any]:
    """`till verify` answers a report (never an error), exit 0 when ok and 1 when not."""
    run = till("--json", "verify", *args)
    doc = run.doc
    assert "error" not in doc, doc
    assert run.code == (0 if doc["ok"] else 1), (run.code, doc)
    return dict(doc)


def _works_again(till: Till, folder: Path, ids: list[str]) -> None:
    """status, timeline and a rewind (and a new seal) work after the repair, and every
    snapshot sealed before the damage is still there (a seal the damage stopped before it
    was published may be there too: a repair publishes what packs hold, INV-6)."""
    status = till.json("status")
    timeline = [s["id"] for s in till.json("timeline")["snapshots"]]
    assert status["attached"] is True and status["head"]["id"] == timeline[0]
    assert timeline[-len(ids) :] == ids[::-1]
    assert till.json("rewind", ids[0], "--yes")["applied"] is True
    assert (folder / "app.py").read_text() == "print('v1')\n"
    assert till.json("snap")["snapshot"]["id"]
    assert _verify(till)["ok"] is True


# -- store.json --------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_store_json_is_a_public_error_naming_it_for_every_command(
    till: Till, folder: Path, sealed: list[str], damage: str
) -> None:
    marker = till.home / "store.json"
    DAMAGES[damage](marker)
    for command in (
        ("status",),
        ("timeline",),
        ("snap",),
        ("rewind", sealed[0], "--yes"),
        ("forks",),
        ("remote", "list"),
    ):
        error = _refused(till("--json", *command))
        assert error["name"] == "store.control_damaged"
        assert error["details"]["file"] == str(marker), (command, error)
    human = till("status")
    assert human.code == 1 and "store.control_damaged" in human.stderr
    assert "Traceback" not in human.stderr and "internal" not in human.stderr


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_verify_reports_a_damaged_store_json_and_repair_writes_it_again(
    till: Till, folder: Path, sealed: list[str], damage: str
) -> None:
    marker = till.home / "store.json"
    DAMAGES[damage](marker)
    report = _verify(till)
    assert report["ok"] is False
    assert [p["object"] for p in report["problems"]] == ["store.json"]
    assert "verify --repair" in report["problems"][0]["problem"]

    repaired = _verify(till, "--repair")
    assert repaired["ok"] is True, repaired
    assert [f["object"] for f in repaired["fixed"]] == ["store.json"]
    assert json.loads(marker.read_bytes()) == {"format": 1}
    assert (till.home / "store.json.damaged").exists(), "what could not be read is kept"
    _works_again(till, folder, sealed)


def test_a_store_json_naming_a_newer_format_is_not_rewritten_by_a_repair(
    till: Till, folder: Path, sealed: list[str]
) -> None:
    marker = till.home / "store.json"
    marker.write_text('{"format": 2}')
    run = till("--json", "verify", "--repair")
    assert run.code == 1 and run.error["name"] == "store.format_unsupported"
    assert json.loads(marker.read_bytes()) == {"format": 2}, "a newer store is left alone"


# -- a workspace's remotes and the machine's ID ---------------------------------------------


@pytest.fixture
def with_remote(till: Till, folder: Path, sealed: list[str], tmp_path: Path) -> Path:
    remote = tmp_path / "remote"
    remote.mkdir()
    till.json("remote", "add", str(remote))
    till.json("sync", "--push")
    return remote


def _remotes_file(till: Till, folder: Path) -> Path:
    workspace = json.loads((folder / ".tillage" / "workspace.json").read_bytes())["workspace"]
    return till.home / "remotes" / f"{workspace}.json"


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_remotes_refuse_only_what_needs_them_and_repair_sets_them_aside(
    till: Till, folder: Path, sealed: list[str], with_remote: Path, damage: str
) -> None:
    path = _remotes_file(till, folder)
    DAMAGES[damage](path)
    for command in (("remote", "list"), ("sync", "--push")):
        error = _refused(till("--json", *command))
        assert error["details"]["file"] == str(path)
    # What needs nothing from the file still works.
    assert till.json("status")["head"]["id"] == sealed[-1]
    assert len(till.json("timeline")["snapshots"]) == 2

    report = _verify(till)
    assert report["ok"] is False
    assert [p["object"] for p in report["problems"]] == [str(path.relative_to(till.home))]
    repaired = _verify(till, "--repair")
    assert repaired["ok"] is True
    (fixed,) = repaired["fixed"]
    assert "till remote add" in fixed["problem"], "it says what is lost and how to get it back"
    assert till.json("remote", "list")["remotes"] == []
    (key,) = (till.home / "keys").iterdir()  # the key stays, as the report says
    till.json("remote", "add", str(with_remote), "--key-file", str(key))
    assert till.json("sync", "--push")["snapshot"]["id"] == sealed[-1]


@pytest.mark.parametrize("damage", ["not_utf8", "empty", "folder"])
def test_a_damaged_machine_id_is_a_public_error_and_repair_lets_sync_make_a_new_one(
    till: Till, folder: Path, sealed: list[str], with_remote: Path, damage: str
) -> None:
    path = till.home / "remotes" / "machine-id"
    DAMAGES[damage](path)
    assert _refused(till("--json", "sync", "--push"))["details"]["file"] == str(path)
    _verify(till, "--repair")
    (folder / "app.py").write_text("print('v3')\n")
    till.json("snap")
    assert till.json("sync", "--push")["snapshot"]["id"]
    assert path.is_file() and path.read_text().strip()


# -- the store's layout: a folder where a file belongs, a file where a folder belongs ---------


LAYOUT = [
    ("locks/publish.lock", "folder", ("snap",)),
    ("locks/maintenance.lock", "folder", ("snap",)),
    ("locks", "file", ("snap",)),
    ("intents", "file", ("status",)),
    ("tmp", "file", ("timeline",)),
    ("remotes", "file", ("remote", "list")),
]


@pytest.mark.parametrize(("name", "kind", "command"), LAYOUT)
def test_a_store_entry_of_the_wrong_kind_is_a_public_error_and_repair_makes_it_again(
    till: Till, folder: Path, sealed: list[str], name: str, kind: str, command: tuple[str, ...]
) -> None:
    path = till.home / name
    if kind == "folder":
        _folder(path)
    else:
        shutil.rmtree(path, ignore_errors=True)
        path.write_bytes(b"garbage")
    error = _refused(till("--json", *command))
    assert error["details"]["file"] == str(path)

    report = _verify(till)
    assert report["ok"] is False and name in [p["object"] for p in report["problems"]]
    repaired = _verify(till, "--repair")
    assert repaired["ok"] is True, repaired
    _works_again(till, folder, sealed)
    assert till("--json", *command).code == 0


# -- the log and the index ------------------------------------------------------------------


def test_a_folder_in_the_place_of_the_log_is_a_public_error_and_repair_keeps_it(
    till: Till, folder: Path, sealed: list[str]
) -> None:
    log = till.home / "log" / "publication.log"
    _folder(log)
    for command in (("status",), ("timeline",), ("snap",)):
        assert _refused(till("--json", *command), STORE_DAMAGED)["name"] == "store.damaged"
    repaired = _verify(till, "--repair")
    assert "publication.log" in [f["object"] for f in repaired["fixed"]]
    assert (till.home / "log" / "publication.log.damaged" / "x").is_file(), "kept, not deleted"
    assert log.is_file()
    assert till("--json", "status").error["name"] == "workspace.not_attached"  # said, not lost


@pytest.mark.parametrize("damage", ["empty", "garbage", "list", "folder"])
def test_a_lost_log_says_so_and_the_folder_takes_its_timeline_back_from_the_packs(
    till: Till, folder: Path, sealed: list[str], damage: str
) -> None:
    # The log is the facts: emptied, replaced or swapped for a folder, it no longer says the
    # folder is attached. The snapshots are still in the packs, and the folder's pointer names
    # their workspace: `till watch` there takes the timeline back (labels kept).
    pointer = folder / ".tillage" / "workspace.json"
    workspace = json.loads(pointer.read_bytes())["workspace"]
    DAMAGES[damage](till.home / "log" / "publication.log")
    status = till("--json", "status")
    if status.error["name"] == "store.damaged":  # a line that does not parse: salvaged first
        _refused(status, STORE_DAMAGED)
        repaired = _verify(till, "--repair")
        assert "publication.log" in [f["object"] for f in repaired["fixed"]]
        status = till("--json", "status")
    assert status.code == 1 and status.error["name"] == "workspace.not_attached"
    assert "2 snapshots" in status.error["message"]
    assert status.error["next"] == f"run `till watch` in {folder} to take its timeline back"
    report = _verify(till)
    assert report["ok"] is False
    (problem,) = report["problems"]
    assert problem["object"] == f"workspace {workspace}" and "till watch" in problem["problem"]

    watched = till.json("watch", "--no-daemon")
    assert watched["resumed"] is True and "2 snapshots" in watched["note"]
    assert json.loads(pointer.read_bytes()) == {"workspace": workspace}, "the same workspace"
    timeline = till.json("timeline")["snapshots"]
    assert [s["id"] for s in timeline][-2:] == sealed[::-1]
    assert timeline[-2]["label"] == "second"
    assert till.json("rewind", sealed[0], "--yes")["applied"] is True
    assert (folder / "app.py").read_text() == "print('v1')\n"
    assert _verify(till)["ok"] is True


def test_a_gc_before_the_folder_takes_its_lost_timeline_back_sweeps_none_of_it(
    till: Till, folder: Path, sealed: list[str]
) -> None:
    # The packs are all that is left of a lost log's timeline: a gc run before `till watch`
    # (or `verify --repair`) takes it back must keep every byte, or the timeline the error
    # promises is gone by the time the person follows it.
    (till.home / "log" / "publication.log").write_bytes(b"")
    assert till("--json", "status").error["name"] == "workspace.not_attached"
    till.json("gc", "--yes")
    watched = till.json("watch", "--no-daemon")
    assert watched["resumed"] is True and "2 snapshots" in watched["note"]
    assert till.json("rewind", sealed[0], "--yes")["applied"] is True
    assert (folder / "app.py").read_text() == "print('v1')\n"
    assert _verify(till)["ok"] is True


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_a_folder_in_the_place_of_an_index_file_is_set_aside_and_the_index_rebuilt(
    till: Till, folder: Path, sealed: list[str], suffix: str
) -> None:
    # INV-4: the index is a cache; nothing needs a repair for it.
    _folder(till.home / f"index.sqlite{suffix}")
    _works_again(till, folder, sealed)
    assert (till.home / f"index.sqlite{suffix}.damaged").exists() or not suffix


# -- a folder's pointer and an interrupted rewind's record ------------------------------------


def test_a_folder_in_the_place_of_the_pointer_does_not_stop_the_workspace_and_repair_mends_it(
    till: Till, folder: Path, sealed: list[str]
) -> None:
    pointer = folder / ".tillage" / "workspace.json"
    workspace = json.loads(pointer.read_bytes())["workspace"]
    _folder(pointer)
    assert till.json("status")["head"]["id"] == sealed[-1]  # the store's catalog knows it
    report = _verify(till)
    assert [p["object"] for p in report["problems"]] == [str(pointer)]
    _verify(till, "--repair")
    assert json.loads(pointer.read_bytes()) == {"workspace": workspace}
    _works_again(till, folder, sealed)


def test_attaching_a_folder_whose_pointer_is_a_folder_is_a_public_error(
    till: Till, user_home: Path
) -> None:
    other = user_home / "other"
    other.mkdir()
    _folder(other / ".tillage" / "workspace.json")
    run = till("--json", "watch", "--no-daemon", cwd=other)
    assert run.code == 1 and run.error["name"] == "workspace.pointer_damaged", run.stdout
    assert run.error["code"] == -32084


@pytest.mark.parametrize("damage", ["empty_object", "list", "folder"])
def test_a_damaged_rewind_record_is_a_public_error_and_repair_sets_it_aside(
    till: Till, folder: Path, sealed: list[str], damage: str
) -> None:
    workspace = json.loads((folder / ".tillage" / "workspace.json").read_bytes())["workspace"]
    intent = till.home / "intents" / f"rewind-{workspace}.json"
    DAMAGES[damage](intent)
    if damage != "list":  # a list is torn-like (not an object): never acted on, removed
        error = _refused(till("--json", "status"))
        assert error["details"]["file"] == str(intent)
        assert "till rewind UNDO --yes" in error["next"]
        assert _verify(till)["ok"] is False
    _verify(till, "--repair")
    _works_again(till, folder, sealed)


# -- the seam: detection never raises ---------------------------------------------------------


def test_the_seam_answers_absent_with_the_reason_on_a_damaged_store_json(
    till: Till, folder: Path, sealed: list[str]
) -> None:
    (till.home / "store.json").write_bytes(b"garbage")
    home = str(till.home)
    assert tillage.agent.tools(folder, home=home) == []
    found = tillage.agent.presence(folder, home=home)
    assert found.attached is False and found.head is None
    assert found.code == CONTROL_DAMAGED and found.error == "store.control_damaged"
    assert found.reason is not None and "store.json" in found.reason
    assert found.next is not None and "till verify --repair" in found.next
    assert tillage.agent.open_workspace(folder, home=home) is None
    assert tillage.agent.attach(folder, home=home) is None
    belt = Toolbelt(Settings(home=till.home, folder=folder, user_home=till.user_home))
    try:
        assert belt.attached() is False and belt.tools() == ()
    finally:
        belt.close()


@pytest.mark.parametrize("damage", ["list", "null", "not_utf8", "folder"])
def test_the_seam_never_raises_for_any_damage_of_store_json(
    till: Till, folder: Path, sealed: list[str], damage: str
) -> None:
    DAMAGES[damage](till.home / "store.json")
    home = str(till.home)
    assert tillage.agent.tools(folder, home=home) == []
    assert tillage.agent.presence(folder, home=home).error == "store.control_damaged"
    assert tillage.agent.attach(folder, home=home) is None


def test_the_seam_answers_absent_even_for_an_error_that_is_no_public_one(
    till: Till, folder: Path, sealed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tillage.store.store import Store

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("a bug, not damage")

    monkeypatch.setattr(Store, "open", broken)
    home = str(till.home)
    found = tillage.agent.presence(folder, home=home)
    assert found.attached is False and found.error == "internal"
    assert found.reason is not None and "RuntimeError" in found.reason
    assert tillage.agent.tools(folder, home=home) == []
    assert tillage.agent.attach(folder, home=home) is None


# -- MCP: a real `till mcp` process lists no tools, says nothing on stderr --------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("damage", ["garbage", "list", "folder"])
async def test_a_real_mcp_server_on_a_damaged_store_lists_no_tools_and_prints_nothing(
    till: Till, folder: Path, sealed: list[str], tmp_path: Path, damage: str
) -> None:
    import sys

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    DAMAGES[damage](till.home / "store.json")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tillage", "--repo", str(folder), "mcp"],
        env=till.env(),
        cwd=str(folder),
    )
    errlog = tmp_path / "stderr.txt"
    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            assert (await client.list_tools()).tools == []
            assert (await client.list_tools()).tools == [], "asked again: still absent"
            called = await client.call_tool("workspace_snapshots", {})
            assert called.is_error  # a tool asked for anyway is refused as a result
    assert errlog.read_text() == "", "nothing on stderr without --debug"
