"""The operation log: what is recorded, and every refusal of `till undo`, each changing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Till
from tests.faults.harness import manifest
from tests.oplog.test_undo import attached, facts, newest_op
from tillage.store.store import Store


def ops(till: Till) -> list[dict[str, Any]]:
    return list(till.json("op", "log", "-n", "1000")["operations"])


def test_each_mutating_verb_records_one_operation_with_its_heads_agent_and_arguments(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("one\n")
    first = attached(till, folder)
    (folder / "a.txt").write_text("two\n")
    second = till.json("snap")["snapshot"]["id"]
    count = len(ops(till))
    till("--json", "rewind", first, "--yes", env={"TILLAGE_AGENT": "claude"})
    recorded = ops(till)
    assert len(recorded) == count + 1
    op = recorded[0]
    assert op["verb"] == "workspace.rewind" and op["command"] == "rewind"
    assert op["agent"] == "claude"
    assert op["heads"]["before"] == second
    assert op["heads"]["after"] == till.json("status")["head"]["id"] != second
    assert op["args"] == {"id": first, "paths": None, "dry_run": False, "yes": True}
    assert len(op["id"]) == 32 and op["short"] == op["id"][:12]
    # A dry run and a read record nothing.
    till.json("rewind", second, "--dry-run")
    till.json("timeline")
    assert len(ops(till)) == count + 1


def test_seals_are_no_operations_so_an_agents_hooks_never_bury_the_log(
    till: Till, folder: Path
) -> None:
    # The timeline is a seal's record: a watcher's seals, `till snap` and every agent hook
    # leave the operation log as it was, so `till op log` still shows what changed things.
    (folder / "a.txt").write_text("one\n")
    head = attached(till, folder)
    till.json("pin", head)
    count = len(ops(till))
    for turn in range(3):
        (folder / "a.txt").write_text(f"turn {turn}\n")
        till.json("snap")
        till.json("hook", "turn-end", "--agent", "claude", "--turn", str(turn))
    assert len(ops(till)) == count
    assert ops(till)[0]["verb"] == "timeline.pin"


def test_the_log_is_newest_first_and_says_how_many_more_the_limit_left_out(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    head = attached(till, folder)
    till.json("pin", head)
    till.json("unpin", head)
    page = till.json("op", "log", "-n", "1")
    assert [o["verb"] for o in page["operations"]] == ["timeline.unpin"]
    assert page["more"] == len(ops(till)) - 1 >= 2
    bad = till("--json", "op", "log", "-n", "0")
    assert bad.code == 1 and bad.doc["error"]["name"] == "invalid_argument"


def test_the_operation_log_is_rebuilt_from_the_publication_log_with_the_index(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    head = attached(till, folder)
    till.json("pin", head)
    before = ops(till)
    (till.home / "index.sqlite").unlink()
    for extra in ("index.sqlite-wal", "index.sqlite-shm"):
        (till.home / extra).unlink(missing_ok=True)
    assert ops(till) == before


def test_a_gc_is_recorded_and_its_undo_is_refused_changing_nothing(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    attached(till, folder)
    other = folder.parent / "other"
    other.mkdir()
    (other / "data.bin").write_bytes(b"bytes a gc reclaims once purged\n" * 4096)
    attached(till, other)
    till.json("forget", "--purge", "--yes", cwd=other)
    assert till.json("gc", "--yes")["objects_removed"] > 0
    op = newest_op(till)
    assert op["verb"] == "store.gc" and op["undoable"] is False
    state, store_facts, count = manifest(folder), facts(till), len(ops(till))
    run = till("--json", "undo", op["id"], "--yes")
    assert run.code == 1
    assert run.doc["error"]["code"] == -32310
    assert run.doc["error"]["name"] == "operation.not_undoable"
    assert "gc" in run.doc["error"]["message"]
    assert manifest(folder) == state and facts(till) == store_facts and len(ops(till)) == count


def test_a_purge_says_it_cannot_be_undone_from_its_folder(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    attached(till, folder)
    till.json("forget", "--purge", "--yes")
    op = newest_op(till)
    assert op["verb"] == "workspace.forget" and op["undoable"] is False
    run = till("--json", "undo", op["short"], "--yes")
    assert run.code == 1 and run.doc["error"]["name"] == "operation.not_undoable"
    assert "purge" in run.doc["error"]["message"]


def test_unknown_malformed_and_ambiguous_operation_ids_are_refused(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    attached(till, folder)
    with Store.open(till.home) as store:
        ws = store.workspace_by_root(str(folder.resolve()))
        assert ws is not None
        for op_id in ("abcdef" + "0" * 26, "abcdef" + "1" * 26):
            store.publish(
                "operation",
                {"id": op_id, "workspace": ws.id, "verb": "timeline.pin", "undo": None},
            )
    state = manifest(folder)
    for ref, name, code in (
        ("ffffffffff", "operation.not_found", -32061),
        ("xyz", "operation.not_found", -32061),
        ("abcd", "operation.not_found", -32061),  # shorter than 6
        ("abcdef", "operation.ambiguous", -32063),
    ):
        run = till("--json", "undo", ref, "--yes")
        assert run.code == 1, run.stdout
        assert (run.doc["error"]["name"], run.doc["error"]["code"]) == (name, code)
    assert manifest(folder) == state


def test_an_operation_undone_already_is_refused_and_names_the_undo(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    head = attached(till, folder)
    till.json("pin", head)
    op = newest_op(till)
    undone = till.json("undo", op["id"], "--yes")
    again = till("--json", "undo", op["id"], "--yes")
    assert again.code == 1
    assert again.doc["error"]["name"] == "operation.already_undone"
    assert again.doc["error"]["code"] == -32311
    assert again.doc["error"]["details"]["undone_by"] == undone["undo_operation"]


def test_nothing_to_undo_is_said_so(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("a\n")
    attached(till, folder)
    run = till("--json", "undo", "--dry-run")
    assert run.code == 1
    assert (run.doc["error"]["name"], run.doc["error"]["code"]) == (
        "operation.nothing_to_undo",
        -32312,
    )


def test_undo_follows_the_confirmation_rule_and_changes_nothing_without_it(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("one\n")
    first = attached(till, folder)
    (folder / "a.txt").write_text("two\n")
    till.json("rewind", first, "--yes")
    op = newest_op(till)
    state, count = manifest(folder), len(ops(till))

    # Machine mode without --yes: confirmation_required, never a hang.
    plain = till("--json", "undo", op["short"])
    assert plain.code == 1 and plain.doc["error"]["name"] == "confirmation_required"
    # --yes without the explicit ID: refused too, naming the operation it would undo.
    unnamed = till("--json", "undo", "--yes")
    assert unnamed.code == 1 and unnamed.doc["error"]["name"] == "confirmation_required"
    assert f"till undo {op['short']} --yes" in unnamed.doc["error"]["next"]
    # The preview lists what would change, and changes nothing.
    preview = till.json("undo", op["short"], "--dry-run")
    assert preview["applied"] is False
    assert [c["path"] for c in preview["changes"]] == ["a.txt"]
    assert preview["next"] == f"till undo {op['short']} --yes"
    assert manifest(folder) == state and len(ops(till)) == count

    # The printed command runs.
    done = till.json(*preview["next"].split()[1:])
    assert done["applied"] is True
    assert (folder / "a.txt").read_text() == "two\n"


def test_the_op_log_page_shows_short_ids_and_what_undoing_each_does(
    till: Till, folder: Path
) -> None:
    (folder / "a.txt").write_text("a\n")
    head = attached(till, folder)
    till.json("pin", head)
    op = newest_op(till)
    page = till("op", "log")
    assert page.code == 0
    assert op["short"] in page.stdout and op["id"] not in page.stdout
    assert f"undo: unpin snapshot {head[:12]}" in page.stdout
    assert f"till undo {op['short']} --dry-run" in page.stdout


def test_the_op_log_and_undo_pages_render_in_colour_and_without(till: Till, folder: Path) -> None:
    (folder / "a.txt").write_text("one\n")
    first = attached(till, folder)
    (folder / "a.txt").write_text("two\n")
    till.json("rewind", first, "--yes")
    op = newest_op(till)
    for argv in (("op", "log"), ("undo", op["short"], "--dry-run")):
        painted = till("--color", "always", *argv)
        plain = till("--color", "never", *argv)
        assert painted.code == plain.code == 0, (painted.stderr, plain.stderr)
        assert "\x1b[" in painted.stdout and "\x1b[" not in plain.stdout
        assert "\\x1b" not in painted.stdout  # painted once, never escaped after
        assert op["short"] in plain.stdout
    assert "a.txt" in till("undo", op["short"], "--dry-run").stdout
