"""What the README promises and the code once did otherwise: a usage error exits 2 (`till sync`
with no mode), `till diff A B` compares two snapshots as git's does, and the commands that only
read (a rewind's dry run, verify) work on a store this process cannot write."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import Till


def _two(till: Till, folder: Path) -> tuple[str, str]:
    (folder / "a.txt").write_text("one\n")
    first = till.json("watch", "--no-daemon")["head"]["id"]
    (folder / "b.txt").write_text("two\n")
    second = till.json("snap")["snapshot"]["id"]
    return str(first), str(second)


def test_sync_with_no_mode_is_a_usage_error_exit_2(till: Till, folder: Path) -> None:
    _two(till, folder)
    run = till("sync")
    assert run.code == 2, run.stderr
    assert "`till sync --push`" in run.stderr
    doc = till("--json", "sync")
    assert doc.code == 2 and doc.error["name"] == "usage"
    both = till("--json", "sync", "--push", "--pull")
    assert both.code == 2 and both.error["name"] == "usage"


def test_diff_takes_two_snapshots_as_two_words(till: Till, folder: Path) -> None:
    first, second = _two(till, folder)
    words = till.json("diff", first[:12], second[:12])
    flag = till.json("diff", first[:12], "--to", second[:12])
    assert words == flag
    assert [c["path"] for c in words["changes"]] == ["b.txt"]
    assert words["to_snapshot"]["id"] == second
    both = till("--json", "diff", first[:12], second[:12], "--to", second[:12])
    assert both.code == 2 and both.error["name"] == "usage"


def _read_only(till: Till, *args: str) -> subprocess.CompletedProcess[str]:
    """`till` in a mount namespace of its own where the store is mounted read-only (root,
    whom permissions do not stop, meets a read-only file system just as another user would
    meet permissions); nothing outside that process sees the mount."""
    store = str(till.home)
    script = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    namespace = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]
    return subprocess.run(
        [*namespace, store, sys.executable, "-m", "tillage", *args],
        cwd=till.cwd,
        env=till.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _can_mount_read_only(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    script = 'mount --bind -o ro "$1" "$1" && ! touch "$1/x" 2>/dev/null'
    run = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(probe)],
        capture_output=True,
    )
    return run.returncode == 0


@pytest.mark.process
def test_a_rewind_preview_and_verify_work_on_a_read_only_store(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("needs root and mount namespaces (unshare) to make a read-only store")
    first, _second = _two(till, folder)
    preview = _read_only(till, "--json", "rewind", first[:12], "--dry-run")
    assert preview.returncode == 0, preview.stdout + preview.stderr
    assert '"applied":false' in preview.stdout and '"b.txt"' in preview.stdout
    verify = _read_only(till, "--json", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert '"ok":true' in verify.stdout
    # What writes is still refused, by name, and nothing changed.
    rewind = _read_only(till, "--json", "rewind", first[:12], "--yes")
    assert rewind.returncode == 1 and '"store.read_only"' in rewind.stdout
    assert (folder / "b.txt").exists()


def test_hydrating_a_table_of_other_columns_names_the_columns_it_needs(
    till: Till, folder: Path, tmp_path: Path
) -> None:
    import sqlite3

    db = tmp_path / "agent.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
    conn.commit()
    conn.close()
    run = till("--json", "project", "hydrate", "--mount", f"notes=sqlite:{db}#notes")
    assert run.code == 1 and run.error["name"] == "projection.collection_failed"
    message = run.error["message"]
    assert "no column key, content, state, updated_ns" in message
    assert "key TEXT PRIMARY KEY, content BLOB, state TEXT, updated_ns INTEGER" in message
    fresh = till.json("project", "hydrate", "--mount", f"notes=sqlite:{db}#fresh")
    assert fresh["files"] == 0 and fresh["mounts"][0]["entries"] == 0  # a new table is made


README = Path(__file__).parents[2] / "README.md"


def test_the_readme_and_the_help_say_nothing_stale() -> None:
    from tillage.verbs.registry import all_verbs

    text = README.read_text()
    docs = " ".join(v.contract.doc for v in all_verbs())
    for stale in ("until garbage collection exists", "a later issue", "answers in about"):
        assert stale not in text and stale not in docs, stale
    assert "--remote-till" in text and "one JSON document per line" in text
    assert "updated_ns INTEGER" in text  # the columns `project hydrate` needs
    assert "till diff 3f2a9c 80d3bc" in text
