"""The merge's human page: what landed or conflicted, the check's verdict and tail, the undo."""

from __future__ import annotations

from typing import Any

from tillage.hosts.cli.human import render

IDS = {"base": "b" * 64, "ours": "0" * 64, "theirs": "f" * 64}


def _doc(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "fork": "feature",
        "landed": False,
        "result": None,
        "changes": 0,
        "conflicts": [],
        "check_output": None,
        "check_failed": False,
        "check_exit_code": None,
        **IDS,
        "changed": [],
        "merged": [],
        "dry_run": False,
        "undo": None,
        "next": None,
    }
    doc.update(fields)
    return doc


CHANGED = [
    {"path": "a.txt", "kind": "modified", "old_size": 3, "new_size": 5},
    {"path": "b.txt", "kind": "added", "old_size": None, "new_size": 2},
]


def test_a_landed_merge_says_what_landed_the_check_and_how_to_undo() -> None:
    output = "\n".join(f"test {i} ok" for i in range(40))
    text = render(
        "merge.apply",
        _doc(
            landed=True,
            result="r" * 64,
            changes=2,
            changed=CHANGED,
            merged=["a.txt"],
            check_output=output,
            check_exit_code=0,
            undo=IDS["ours"],
            next=f"till rewind {IDS['ours']} --yes",
        ),
        now=0,
    )
    assert "Merged fork feature: 2 paths" in text
    assert "Merged line by line: a.txt" in text
    # The check's output was passed on live, before the page: it is not printed again.
    assert "The check passed" in text and "output is above" in text and "test 39 ok" not in text
    assert text.rstrip().endswith(f"till rewind {IDS['ours'][:12]} --yes")
    assert "To undo the merge" in text


def test_conflicts_are_listed_with_their_kinds_and_how_to_compare() -> None:
    conflict = {
        "path": "app.py",
        "kind": "modify_modify",
        "reason": "both sides changed the same lines",
        "base": None,
        "ours": None,
        "theirs": None,
    }
    text = render("merge.apply", _doc(conflicts=[conflict]), now=0)
    assert "Nothing landed" in text and "1 conflict" in text
    assert "modify_modify" in text and "app.py" in text
    assert f"till cat {IDS['ours'][:12]} app.py" in text
    assert text.rstrip().endswith("till merge feature")


def test_a_failed_check_shows_its_status_and_output() -> None:
    text = render(
        "merge.apply",
        _doc(check_failed=True, check_exit_code=2, check_output="FAILED test_x\n", changed=CHANGED),
        now=0,
    )
    assert "Nothing landed" in text and "failed (exit 2)" in text and "FAILED test_x" not in text


def test_a_dry_run_and_a_snapshot_merge() -> None:
    text = render(
        "merge.apply",
        _doc(fork=None, dry_run=True, changed=CHANGED, changes=2, merged=["a.txt"]),
        now=0,
    )
    assert f"Merging snapshot {IDS['theirs'][:12]} would change 2 paths" in text
    assert "Nothing was changed" in text
    assert text.rstrip().endswith(f"till merge --snapshot {IDS['theirs'][:12]}")
    nothing = render("merge.apply", _doc(dry_run=True), now=0)
    assert "Nothing to merge" in nothing
