"""What git and restic users reach for when reading a timeline: `till ls`, `diff -p` and
`--stat`, `status` describing the folder itself, and `timeline` saying how many more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import Till

import tillage.agent


def _project(folder: Path) -> None:
    (folder / "src").mkdir()
    (folder / "src" / "app.py").write_text("a\nb\nc\n")
    (folder / "README").write_text("hello\n")
    (folder / "logo.bin").write_bytes(b"\x89PNG\0\0\x01")
    os.symlink("README", folder / "READ")


# -- till ls ---------------------------------------------------------------------------------


def test_ls_lists_a_snapshots_entries_with_kinds_sizes_and_content_ids(
    till: Till, folder: Path
) -> None:
    _project(folder)
    head = till.json("watch", "--no-daemon")["head"]
    (folder / "later.txt").write_text("not in the snapshot")
    doc = till.json("ls", head["short"])
    assert doc["snapshot"]["id"] == head["id"]
    by_path = {e["path"]: e for e in doc["entries"]}
    assert list(by_path) == ["READ", "README", "logo.bin", "src", "src/app.py"]
    assert by_path["src/app.py"]["kind"] == "file" and by_path["src/app.py"]["size"] == 6
    assert by_path["src"]["kind"] == "dir" and by_path["src"]["size"] is None
    assert by_path["READ"] == {**by_path["READ"], "kind": "symlink", "target": "README"}
    assert by_path["READ"]["content"] is None
    assert len(by_path["README"]["content"]) == 64
    assert by_path["README"]["mode"] & 0o777 == (folder / "README").stat().st_mode & 0o777
    assert doc["more"] == 0 and doc["next_after"] is None


def test_ls_below_a_path_lists_only_that_folder_and_a_missing_path_is_not_found(
    till: Till, folder: Path
) -> None:
    _project(folder)
    till.json("watch", "--no-daemon")
    assert [e["path"] for e in till.json("ls", "head", "src")["entries"]] == ["src", "src/app.py"]
    assert [e["path"] for e in till.json("ls", "head", "README")["entries"]] == ["README"]
    run = till("--json", "ls", "head", "nope")
    assert run.code == 1 and run.error["name"] == "snapshot.path_not_found"
    assert till("--json", "ls", "head", "../x").code == 1


def test_ls_pages_with_limit_and_after_and_the_human_page_names_the_next_page(
    till: Till, folder: Path
) -> None:
    for i in range(7):
        (folder / f"f{i}.txt").write_text(str(i))
    till.json("watch", "--no-daemon")
    first = till.json("ls", "head", "-n", "3")
    assert [e["path"] for e in first["entries"]] == ["f0.txt", "f1.txt", "f2.txt"]
    assert first["more"] == 4 and first["next_after"] == "f2.txt"
    second = till.json("ls", "head", "-n", "3", "--after", first["next_after"])
    assert [e["path"] for e in second["entries"]] == ["f3.txt", "f4.txt", "f5.txt"]
    assert second["more"] == 1
    page = till("ls", "head", "-n", "3").stdout
    assert "… 4 more" in page
    cmd = page.strip().splitlines()[-1].split()
    assert cmd[:2] == ["till", "ls"] and cmd[3:] == ["--after", "f2.txt", "-n", "3"]
    # The printed command runs and gives the next page.
    nxt = till(*cmd[1:])
    assert nxt.code == 0 and "f3.txt" in nxt.stdout and "f0.txt" not in nxt.stdout
    assert till("--json", "ls", "head", "-n", "0").error["name"] == "invalid_argument"


def test_ls_prints_mode_size_and_path_and_long_adds_the_content_id(
    till: Till, folder: Path
) -> None:
    _project(folder)
    head = till.json("watch", "--no-daemon")["head"]
    lines = till("ls", "head").stdout.splitlines()
    assert any(line.startswith("-rw") and line.endswith("src/app.py") for line in lines)
    assert any(line.startswith("d") and line.endswith("src/") for line in lines)
    assert any(line.endswith("READ -> README") for line in lines)
    app = till.json("ls", head["id"], "src/app.py")["entries"][0]
    long = till("ls", "head", "src/app.py", "-l").stdout
    assert app["content"][:12] in long
    assert app["content"][:12] not in till("ls", "head", "src/app.py").stdout


def test_a_positional_word_after_a_flag_is_taken_as_git_takes_it(till: Till, folder: Path) -> None:
    # `till ls head -l src` is how git and restic users type it: the PATH after the flag
    # fills the positional still empty; a word with no place left is still refused.
    _project(folder)
    till.json("watch", "--no-daemon")
    late = till("ls", "head", "-l", "src")
    assert late.code == 0, late.stderr
    assert late.stdout == till("ls", "head", "src", "-l").stdout
    assert "src/app.py" in late.stdout and "README" not in late.stdout
    extra = till("ls", "head", "-l", "src", "more")
    assert extra.code == 2 and "unrecognized arguments: more" in extra.stderr


def test_ls_is_a_capped_read_only_tool(till: Till, folder: Path) -> None:
    for i in range(5):
        (folder / f"f{i}").write_text("x")
    till.json("watch", "--no-daemon")
    tool = {t.name: t for t in tillage.agent.tools(folder, home=till.home)}["workspace_ls"]
    assert tool.annotations["readOnlyHint"] is True
    schema = tool.input_schema["properties"]["limit"]  # type: ignore[attr-defined]
    assert schema["maximum"] == 1000
    page = tool.call({"snapshot": "head", "limit": 2})
    assert page.structured["more"] == 3  # type: ignore[index]
    assert "file f1" in page.text and "after='f1'" in page.text
    assert tool.call({"snapshot": "head", "limit": 1001}).is_error


# -- diff -p and --stat ----------------------------------------------------------------------


def test_diff_patch_is_a_unified_diff_per_text_file_and_binary_files_say_so(
    till: Till, folder: Path
) -> None:
    _project(folder)
    till.json("watch", "--no-daemon")
    (folder / "src" / "app.py").write_text("a\nB\nc\nd")
    (folder / "logo.bin").write_bytes(b"\x89PNG\0\0\x02")
    (folder / "README").unlink()
    doc = till.json("diff", "head", "-p")
    patches = {p["path"]: p for p in doc["patches"]}
    assert patches["src/app.py"]["text"] == (
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,3 +1,4 @@\n a\n-b\n+B\n c\n+d\n"
        "\\ No newline at end of file\n"
    )
    assert patches["logo.bin"] == {
        "path": "logo.bin",
        "kind": "modified",
        "binary": True,
        "text": None,
        "note": "binary files differ",
    }
    assert patches["README"]["text"] == "--- a/README\n+++ /dev/null\n@@ -1 +0,0 @@\n-hello\n"
    page = till("diff", "head", "-p").stdout
    assert "+B" in page and "-b" in page and "Binary files differ: logo.bin" in page
    assert till.json("diff", "head")["patches"] is None  # only when asked
    tool = {t.name: t for t in tillage.agent.tools(folder, home=till.home)}["workspace_diff"]
    said = tool.call({"target": "head", "patch": True, "stat": True}).text
    assert "-b\n+B" in said and "+2 -1 lines" in said and "binary files differ" in said


def test_diff_stat_counts_lines_per_file_and_sums_them_as_git_does(
    till: Till, folder: Path
) -> None:
    _project(folder)
    first = till.json("watch", "--no-daemon")["head"]
    (folder / "src" / "app.py").write_text("a\nB\nc\nd\n")
    (folder / "logo.bin").write_bytes(b"\x89PNG\0\0\x02")
    (folder / "new.txt").write_text("1\n2\n")
    till.json("snap")
    stat = till.json("diff", first["id"], "--to", "head", "--stat")["stat"]
    files = {f["path"]: f for f in stat["files"]}
    assert files["src/app.py"] == {
        "path": "src/app.py",
        "insertions": 2,
        "deletions": 1,
        "binary": False,
        "note": None,
    }
    assert files["new.txt"]["insertions"] == 2 and files["new.txt"]["deletions"] == 0
    assert files["logo.bin"]["binary"] is True and files["logo.bin"]["insertions"] is None
    assert (stat["files_changed"], stat["insertions"], stat["deletions"]) == (3, 4, 1)
    page = till("diff", first["id"], "--to", "head", "--stat").stdout
    assert " src/app.py | 3 ++-" in page
    assert " logo.bin   | Bin" in page
    assert " 3 files changed, 4 insertions(+), 1 deletion(-)" in page


# -- status describes the folder -------------------------------------------------------------


def test_status_counts_the_paths_that_differ_from_the_head_and_names_the_diff(
    till: Till, folder: Path
) -> None:
    _project(folder)
    head = till.json("watch", "--no-daemon")["head"]
    clean = till.json("status")["folder"]
    assert clean == {
        "checked": True,
        "how": "walk",
        "differs": 0,
        "at": head["id"],
        "rewound_at": None,
        "note": None,
    }
    (folder / "README").write_text("changed\n")
    (folder / "x.txt").write_text("x")
    folder_now = till.json("status")["folder"]
    assert folder_now["differs"] == len(till.json("diff", "head")["changes"]) == 2
    assert folder_now["at"] is None
    assert "2 paths differ from the head; `till diff head`" in till("status").stdout


def test_status_after_a_rewind_says_where_the_folder_is_and_when_it_was_rewound(
    till: Till, folder: Path
) -> None:
    _project(folder)
    first = till.json("watch", "--no-daemon")["head"]
    (folder / "README").write_text("two\n")
    till.json("snap")
    till.json("rewind", first["short"], "--yes", env={"TILLAGE_NOW": "2026-01-01T10:00:00Z"})
    doc = till.json("status")["folder"]
    assert doc["at"] == first["id"]
    assert doc["rewound_at"] == "2026-01-01T10:00:00.000000Z"
    page = till("status", env={"TILLAGE_NOW": "2026-01-01T10:00:05Z"}).stdout
    assert f"at {first['short']}, rewound 5 s ago" in page
    (folder / "README").write_text("edited after the rewind\n")
    assert till.json("status")["folder"]["rewound_at"] is None


def test_status_does_not_walk_a_large_folder_without_a_watcher(till: Till, folder: Path) -> None:
    from tillage.verbs.folder import WALK_MAX, WATCHED_MAX

    for i in range(WALK_MAX + 1):
        (folder / f"f{i}").write_bytes(b"")
    till.json("watch", "--no-daemon")
    (folder / "f0").write_text("changed")
    doc = till.json("status")["folder"]
    assert doc["checked"] is False and doc["differs"] is None
    assert "till diff head" in doc["note"]
    assert "not checked" in till("status").stdout
    from tillage.verbs.registry import verb_for_command

    status = verb_for_command("status")
    assert status is not None and f"{WALK_MAX:,} files" in status.contract.doc
    assert f"{WATCHED_MAX:,} files" in status.contract.doc


def test_status_of_a_folder_it_does_not_walk_does_not_load_the_seal(
    till: Till, folder: Path
) -> None:
    """The most-called command skips the seal's 20 ms of imports when it will not walk."""
    from tillage.verbs.folder import WALK_MAX

    for i in range(WALK_MAX + 1):
        (folder / f"f{i}").write_bytes(b"")
    till.json("watch", "--no-daemon")
    program = (
        "import sys\n"
        "from tillage.hosts.cli.main import main\n"
        "sys.argv = ['till', '--json', 'status']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('seal' if 'tillage.workspace.seal' in sys.modules else 'no seal', file=sys.stderr)"
    )

    def status() -> tuple[bool, str]:
        run = subprocess.run(
            [sys.executable, "-c", program],
            cwd=folder,
            env=till.env(),
            capture_output=True,
            text=True,
        )
        return json.loads(run.stdout)["folder"]["checked"], run.stderr.strip().splitlines()[-1]

    assert status() == (False, "no seal")
    (folder / "f0").unlink()  # small enough to walk: the seal's walk tells what differs
    for i in range(1, WALK_MAX // 2):
        (folder / f"f{i}").unlink()
    till.json("snap")
    assert status() == (True, "seal")


# -- timeline says how many more -------------------------------------------------------------


def test_timeline_says_how_many_more_match_beyond_its_limit(till: Till, folder: Path) -> None:
    (folder / "a").write_text("0")
    till.json("watch", "--no-daemon")
    for i in range(1, 5):
        (folder / "a").write_text(str(i))
        till.json("snap", "-m", "odd" if i % 2 else "even")
    assert till.json("timeline", "-n", "2")["more"] == 3
    assert till.json("timeline")["more"] == 0
    assert till.json("timeline", "-n", "5")["more"] == 0
    assert till.json("timeline", "-n", "1", "--trigger", "manual")["more"] == 3
    page = till("timeline", "-n", "2").stdout
    assert "… 3 more (`till timeline -n 5` lists them all)" in page
    assert "more" not in till("timeline").stdout
    assert "default: 50" in till("timeline", "--help").stdout
