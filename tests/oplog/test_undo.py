"""`till undo` of each undoable operation puts back the exact prior state: the folder byte for
byte (modes and links too) and the store's facts (pins, forks, claims); an undo is an
operation too, so undoing it does the first again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Till
from tests.faults.harness import STATE_A, STATE_B, manifest, write_state
from tillage.store.store import Store


def facts(till: Till) -> dict[str, Any]:
    """The store's facts an undo must restore: pins, forks (live and removed), claims."""
    with Store.open(till.home) as store:
        c = store.conn
        return {
            "pins": sorted(r[0] for r in c.execute("SELECT snapshot FROM pins")),
            "forks": sorted(
                c.execute(
                    "SELECT workspace, parent, name, base, root, removed_ns IS NULL, port "
                    "FROM forks"
                )
            ),
            "claims": sorted(
                c.execute(
                    "SELECT id, family, pattern, owner, expires_ns, claimed_ns, workspace "
                    "FROM claims"
                )
            ),
            "attached": sorted(c.execute("SELECT id, root, forgotten FROM workspaces")),
        }


def newest_op(till: Till, cwd: Path | None = None) -> dict[str, Any]:
    return dict(till.json("op", "log", "-n", "1", cwd=cwd)["operations"][0])


def undo(till: Till, op: dict[str, Any], cwd: Path | None = None) -> dict[str, Any]:
    """Undoes `op` by a 12-character prefix (as a person would) and returns the result."""
    done = till.json("undo", op["short"], "--yes", cwd=cwd)
    assert done["applied"] is True
    assert done["operation"]["id"] == op["id"]
    return dict(done)


def attached(till: Till, folder: Path) -> Any:
    till.json("watch", "--no-daemon", cwd=folder)
    return till.json("status", cwd=folder)["head"]["id"]


def test_a_rewind_undone_puts_the_folder_back_byte_for_byte_and_an_undo_of_that_redoes_it(
    till: Till, folder: Path
) -> None:
    write_state(folder, STATE_A)
    target = attached(till, folder)
    write_state(folder, STATE_B)
    before, before_facts = manifest(folder), facts(till)
    till.json("rewind", target, "--yes")
    rewound = manifest(folder)
    op = newest_op(till)
    assert op["verb"] == "workspace.rewind" and op["undoable"] is True
    assert op["args"]["id"] == target

    done = undo(till, op)
    assert manifest(folder) == before
    # Followers of `till events` are told the folder was put back.
    lines = till("--json", "events").stdout.splitlines()
    told = [e for e in map(json.loads, lines) if e["kind"] == "rewound"][-1]
    assert told["detail"]["snapshot"] == done["restored"] == op["undo"]["to"]
    assert told["detail"]["operation"] == done["undo_operation"]
    assert facts(till)["pins"] == before_facts["pins"]
    assert newest_op(till)["undoes"] == op["id"]

    # Undoing the undo does the rewind again.
    redo = newest_op(till)
    assert redo["id"] == done["undo_operation"]
    undo(till, redo)
    assert manifest(folder) == rewound


def test_a_rewind_of_some_paths_undone_touches_only_those_paths(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a1\n")
    (folder / "b.txt").write_text("b1\n")
    target = attached(till, folder)
    (folder / "a.txt").write_text("a2\n")
    (folder / "b.txt").write_text("b2\n")
    before = manifest(folder)
    till.json("rewind", target, "--paths", "a.txt", "--yes")
    assert (folder / "a.txt").read_text() == "a1\n"
    undo(till, newest_op(till))
    assert manifest(folder) == before


def test_a_pin_and_an_unpin_undone_put_the_pins_back(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    head = attached(till, folder)
    before = facts(till)
    till.json("pin", head)
    undo(till, newest_op(till))
    assert facts(till) == before
    till.json("pin", head)
    pinned = facts(till)
    till.json("unpin", head)
    undo(till, newest_op(till))
    assert facts(till) == pinned


def test_a_pin_of_a_pinned_snapshot_changes_nothing_and_records_no_operation(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    head = attached(till, folder)
    till.json("pin", head)
    ops = len(till.json("op", "log", "-n", "100")["operations"])
    till.json("pin", head)
    assert len(till.json("op", "log", "-n", "100")["operations"]) == ops


def test_a_claim_undone_is_released_and_a_release_undone_puts_the_same_claim_back(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    attached(till, folder)
    before = facts(till)
    claim = till.json("claim", "src/**", "--owner", "alice")["claim"]
    taken = facts(till)
    undo(till, newest_op(till))
    assert facts(till) == before
    # The undo of that undo takes it again: the same claim, expiry and time taken.
    undo(till, newest_op(till))
    assert facts(till) == taken
    till.json("release", claim["id"], "--owner", "alice")
    assert facts(till)["claims"] == []
    undo(till, newest_op(till))
    assert facts(till) == taken


def test_a_fork_undone_is_removed_and_a_fork_rm_undone_restores_the_same_fork(
    till: Till, folder: Path
) -> None:
    write_state(folder, STATE_A)
    attached(till, folder)
    before = facts(till)
    made = till.json("fork", "alpha")["fork"]
    fork_root = Path(made["path"])
    (fork_root / "new.txt").write_text("work in the fork\n")
    (fork_root / "run.sh").chmod(0o700) if (fork_root / "run.sh").exists() else None
    in_fork = manifest(fork_root)
    with_fork = facts(till)

    undo(till, newest_op(till))  # the fork goes (sealed first)
    assert not fork_root.exists()
    assert [f[:5] for f in facts(till)["forks"] if f[5]] == [f[:5] for f in before["forks"]]

    undo(till, newest_op(till))  # undoing that undo restores it, work included
    assert manifest(fork_root) == in_fork
    assert facts(till)["forks"] == with_fork["forks"]
    assert till.json("status", cwd=fork_root)["attached"] is True

    till.json("fork-rm", "alpha", "--yes")
    assert not fork_root.exists()
    undo(till, newest_op(till))
    assert manifest(fork_root) == in_fork
    assert facts(till)["forks"] == with_fork["forks"]
    assert [f["name"] for f in till.json("forks")["forks"]] == ["alpha"]


def test_a_merge_undone_puts_the_folder_back_and_gives_the_fork_its_base_back(
    till: Till, folder: Path
) -> None:
    write_state(folder, STATE_A)
    attached(till, folder)
    fork_root = Path(till.json("fork", "alpha")["fork"]["path"])
    (fork_root / "from-fork.txt").write_text("landed by a merge\n")
    before, before_facts = manifest(folder), facts(till)
    merged = till.json("merge", "alpha")
    assert merged["landed"] is True
    assert (folder / "from-fork.txt").exists()
    assert facts(till)["forks"] != before_facts["forks"]  # the merge moved the fork's base
    undo(till, newest_op(till))
    assert manifest(folder) == before
    assert facts(till)["forks"] == before_facts["forks"]
    # So the next merge lands the fork's work again.
    assert till.json("merge", "alpha", "--dry-run")["changes"] == 1


def test_a_session_revert_undone_puts_the_folder_back(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("one\n")
    attached(till, folder)
    first = till.json("session", "start", "s1")["commit"]
    (folder / "a.txt").write_text("two\n")
    (folder / "b.txt").write_text("new\n")
    till.json("session", "record", "s1")
    before = manifest(folder)
    till.json("session", "revert", first["id"], "--yes")
    assert (folder / "a.txt").read_text() == "one\n"
    undo(till, newest_op(till))
    assert manifest(folder) == before


def test_a_forget_undone_from_the_detached_folder_attaches_it_again_with_its_timeline(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    attached(till, folder)
    timeline = till.json("timeline")["snapshots"]
    before = facts(till)
    till.json("forget")
    assert till("--json", "status").doc["error"]["name"] == "workspace.not_attached"
    op = newest_op(till)
    assert op["verb"] == "workspace.forget"
    undo(till, op)
    assert facts(till) == before
    assert till.json("status")["attached"] is True
    assert till.json("timeline")["snapshots"] == timeline


def test_a_pull_undone_puts_the_folder_back_as_it_was_before_the_pull(
    tmp_path: Path, till: Till, folder: Path
) -> None:
    b = Till(tmp_path / "home-b", till.user_home, tmp_path)
    remote = tmp_path / "remote"
    (folder / "notes.txt").write_text("one\n")
    till.json("watch", "--no-daemon")
    key = till.json("remote", "add", str(remote))["key"]
    till.json("sync", "--push")
    b.json("clone", str(remote), "b", "--key", key, cwd=tmp_path)
    copy = tmp_path / "b"
    (folder / "notes.txt").write_text("two, from a\n")
    till.json("sync", "--push")
    before = manifest(copy)
    pulled = b.json("sync", "--pull", cwd=copy)
    assert pulled["disposition"] == "fast_forwarded" and pulled["undo"]
    assert (copy / "notes.txt").read_text() == "two, from a\n"
    op = newest_op(b, cwd=copy)
    assert op["verb"] == "sync.run"
    undo(b, op, cwd=copy)
    assert manifest(copy) == before


def test_undo_without_an_id_walks_back_and_skips_what_was_undone(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    head = attached(till, folder)
    till.json("pin", head)
    till.json("claim", "docs/**", "--owner", "bob")
    newest = till.json("undo", "--dry-run")["operation"]
    assert newest["verb"] == "claim.take"
    undo(till, newest)
    # The next plain undo is the pin's (the undo itself and the undone claim are passed by).
    assert till.json("undo", "--dry-run")["operation"]["verb"] == "timeline.pin"
