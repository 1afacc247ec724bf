"""The sync verbs' pages: the key a person must keep said once and plainly, and the command to
run next after every answer that needs one."""

from __future__ import annotations

import re

from tillage.hosts.cli import units
from tillage.hosts.cli.human import render

NOW = units.parse_rfc3339("2026-12-01T12:00:00Z") or 0.0
KEY = "ab" * 32


def test_remote_add_names_the_new_key_file_never_the_key() -> None:
    doc = {
        "remote": "/r",
        "name": "origin",
        "clone_url": "/r",
        "key": KEY,
        "key_file": "/home/me/.local/share/tillage/keys/origin-1a2b3c4d.key",
        "clone_dest": "project",
    }
    text = render("remote.add", doc, now=NOW)
    assert KEY not in text and not re.search(r"[0-9a-f]{64}", text)
    assert "/home/me/.local/share/tillage/keys/origin-1a2b3c4d.key" in text and "Keep" in text
    assert "`till sync --push`" in text  # first: a clone of an empty remote finds nothing
    assert text.rstrip().endswith(
        "till clone /r project --key-file /home/me/.local/share/tillage/keys/origin-1a2b3c4d.key"
    )
    known = render("remote.add", {k: v for k, v in doc.items() if k[:3] != "key"}, now=NOW)
    assert KEY not in known and known.rstrip().endswith("till sync --push")


def test_a_diverged_pull_says_nothing_changed_and_what_lands_it() -> None:
    doc = {
        "ref": "main",
        "remote": "origin",
        "disposition": "diverged",
        "local_snapshot": "1" * 64,
        "remote_snapshot": "2" * 64,
        "fetched_objects": 3,
        "fetched_bytes": 900,
        "next": "till merge --snapshot " + "2" * 64,
    }
    text = render("sync.run", doc, now=NOW)
    assert "Nothing in the folder was changed" in text
    assert text.rstrip().endswith("till merge --snapshot " + "2" * 12)  # people's IDs
    pushed = {
        "ref": "main",
        "remote": "origin",
        "snapshot": {"short": "3" * 12},
        "uploaded_objects": 4,
        "reused_objects": 9,
        "uploaded_bytes": 2048,
    }
    assert "Pushed 333333333333 to origin/main: 4 objects (2.0 KiB" in render(
        "sync.run", pushed, now=NOW
    )
