"""`till work` against a folder remote, as a CI runner would run it (a store of its own, no
workspace): the result ref's head is a child of the input snapshot, holding what the command
made; a failing command's result is pushed all the same and its status is `work`'s; the
disposable folder and its timeline go (unless --keep); runs on different result refs at once
never contend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Till
from tillage.core import codec
from tillage.crypto import RecoveryKey
from tillage.features.sync import remote_index
from tillage.features.sync.engine import read_ref
from tillage.features.sync.repository import open_repository
from tillage.features.sync.transfer import BlobSource
from tillage.remote.directory import DirectoryRemote


def published(tmp_path: Path, till: Till, folder: Path) -> tuple[Path, str, str]:
    """A workspace pushed to a folder remote: (the remote, its key, the pushed snapshot)."""
    (folder / "src.txt").write_text("source\n")
    till.json("watch", "--no-daemon")
    remote = tmp_path / "remote"
    key = till.json("remote", "add", str(remote))["key"]
    pushed = till.json("sync", "--push")["snapshot"]["id"]
    return remote, key, pushed


def runner(tmp_path: Path, till: Till) -> Till:
    """A CI runner: a store of its own, started in a folder that is no workspace."""
    (tmp_path / "ci").mkdir(exist_ok=True)
    return Till(tmp_path / "store-ci", till.user_home, tmp_path / "ci")


def head_of(remote: Path, key: str, ref: str) -> tuple[str, codec.SnapshotRecord, list[str]]:
    """A ref's head as the remote holds it, opened below the transport: (its ID, its record,
    the ref's history)."""
    store = DirectoryRemote(remote)
    opened = open_repository(store, RecoveryKey.from_hex(key))
    state = read_ref(store, opened.key_for_documents, ref)
    assert state is not None
    source = BlobSource(store, opened.master, remote_index.load(store, opened.master, None))
    (got,) = source.fetch([(bytes.fromhex(state.snapshot), codec.Kind.SNAPSHOT)], "the head")
    return state.snapshot, codec.decode_snapshot(got.raw), list(state.history)


def leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("till-work-"))


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """The runner's TMPDIR, where disposable folders go."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


def test_work_pushes_a_child_of_the_input_and_cleans_up(
    tmp_path: Path, till: Till, folder: Path, tmp: Path
) -> None:
    remote, key, pushed = published(tmp_path, till, folder)
    ci = runner(tmp_path, till)
    script = 'test "$TILLAGE_RECOVERY_KEY" = "" && cat src.txt > built.txt && echo built'
    run = ci(
        "--json", "work", "--remote", str(remote), "--name", "ci", "--ref", "main",
        "--result-ref", "ci/result", "--", script,
        env={"TILLAGE_RECOVERY_KEY": key, "TMPDIR": str(tmp)},
    )  # fmt: skip
    assert run.code == 0, run.stderr
    doc = run.doc
    assert doc["input"] == pushed and doc["exit_code"] == 0 and doc["folder"] is None
    assert "built" in run.stderr  # the command's output: stderr under --json
    result, record, _history = head_of(remote, key, "ci/result")
    assert doc["result"] == result != pushed
    assert record.parent == pushed  # sealed as a child of the input
    assert leftovers(tmp) == []  # the folder went, and its timeline

    # What the command made is in the result: a clone of it holds it.
    clone = ci.json("clone", str(remote), "out", "--ref", "ci/result", "--key", key)
    assert (Path(clone["workspace"]) / "built.txt").read_text() == "source\n"
    assert (folder / "built.txt").exists() is False  # the input's machine is untouched

    # Run again: the new result replaces the last one, which stays in the ref's history.
    again = ci.json(
        "work", "--remote", str(remote), "--key", key, "--result-ref", "ci/result", "--", "true",
        env={"TMPDIR": str(tmp)},
    )  # fmt: skip
    second, record, history = head_of(remote, key, "ci/result")
    assert again["result"] == second and record.parent == pushed
    assert history[:2] == [second, result]


def test_a_failing_command_is_pushed_and_its_status_is_works(
    tmp_path: Path, till: Till, folder: Path, tmp: Path
) -> None:
    remote, key, pushed = published(tmp_path, till, folder)
    ci = runner(tmp_path, till)
    run = ci(
        "--json", "work", "--remote", str(remote), "--key", key, "--result-ref", "broken",
        "--keep", "--", "sh", "-c", "echo half > partial.txt; exit 7",
        env={"TMPDIR": str(tmp)},
    )  # fmt: skip
    assert run.code == 7
    assert run.doc["exit_code"] == 7
    result, record, _ = head_of(remote, key, "broken")
    assert run.doc["result"] == result and record.parent == pushed
    assert "exited 7" in (record.label or "")
    kept = Path(run.doc["folder"])  # --keep: the folder and its timeline stay
    assert (kept / "partial.txt").read_text() == "half\n"
    assert kept.parent.parent == tmp
    timeline = ci.json("timeline", cwd=kept)["snapshots"]
    assert [s["id"] for s in timeline][:2] == [result, pushed]

    # The kept timeline holds the input now (a snapshot belongs to one timeline): a run in
    # the same store still pushes a child of it.
    again = ci.json(
        "work", "--remote", str(remote), "--key", key, "--result-ref", "again", "--", "true",
        env={"TMPDIR": str(tmp)},
    )  # fmt: skip
    result, record, _ = head_of(remote, key, "again")
    assert again["result"] == result and record.parent == pushed


@pytest.mark.process
def test_works_on_different_result_refs_at_once_never_contend(
    tmp_path: Path, till: Till, folder: Path, tmp: Path
) -> None:
    remote, key, pushed = published(tmp_path, till, folder)
    ci = runner(tmp_path, till)
    env = {**ci.env(), "TILLAGE_RECOVERY_KEY": key, "TMPDIR": str(tmp)}
    till_work = [sys.executable, "-m", "tillage", "--json", "work", "--remote", str(remote)]
    procs = [
        subprocess.Popen(
            [
                *till_work,
                "--name",
                f"job{n}",
                "--result-ref",
                f"out-{n}",
                "--",
                f"sleep 0.3; echo {n} > job.txt",
            ],
            cwd=ci.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    docs: list[dict[str, Any]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        docs.append(json.loads(out))
    for n, doc in enumerate(docs):
        result, record, history = head_of(remote, key, f"out-{n}")
        assert doc["result"] == result and record.parent == pushed and history == [result]
        clone = ci.json("clone", str(remote), f"c{n}", "--ref", f"out-{n}", "--key", key)
        assert (Path(clone["workspace"]) / "job.txt").read_text() == f"{n}\n"
    assert leftovers(tmp) == []
    assert head_of(remote, key, "main")[0] == pushed  # the input ref is untouched


def test_work_refuses_before_it_makes_anything(
    tmp_path: Path, till: Till, folder: Path, tmp: Path
) -> None:
    remote, key, _pushed = published(tmp_path, till, folder)
    ci = runner(tmp_path, till)
    env = {"TMPDIR": str(tmp)}
    base = ("--json", "work", "--remote", str(remote), "--result-ref", "out")
    run = ci(*base, "--", "true", env=env)
    assert run.code == 1 and run.error["name"] == "sync.bad_key"
    run = ci(*base, "--key", "ab" * 32, "--", "true", env=env)
    assert run.code == 1 and run.error["name"] == "integrity"
    run = ci(*base, "--key", key, "--ref", "nothing-here", "--", "true", env=env)
    assert run.code == 1 and run.error["name"] == "sync.ref_missing"
    run = ci(*base, "--key", key, env=env)
    assert run.code == 1 and run.error["name"] == "invalid_argument"
    assert leftovers(tmp) == []
    place = DirectoryRemote(remote)
    master = open_repository(place, RecoveryKey.from_hex(key)).key_for_documents
    assert read_ref(place, master, "out") is None
