"""Planning a three-way merge (core.merge_plan): each kind of decision, and a model check.

Folders are flat manifests (path -> Entry). The model: a path only one side changed takes that
side; a path both changed the same way converges; anything else is a line merge (text files) or
a conflict; and a merge without conflicts never leaves a path without its folder.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import example, given
from hypothesis import strategies as st

from tests.hypothesis_profiles import examples
from tillage.core.merge_plan import ConflictKind, MergePlan, TextJob, plan_merge, same
from tillage.core.models import ContentKind, Entry, EntryFlag, EntryKind

Manifest = dict[str, Entry]

PATHS = ("a", "b", "d", "d/x", "d/y", "d/e", "d/e/z")
CONTENTS = (b"\x01" * 32, b"\x02" * 32, b"\x03" * 32)
MODES = (0o644, 0o755)


def file(path: str, content: bytes = CONTENTS[0], mode: int = 0o644, mtime: int = 1) -> Entry:
    return Entry(path.rsplit("/", 1)[-1].encode(), EntryKind.FILE, mode, 3, mtime,
                 ContentKind.CHUNK, content)  # fmt: skip


def folder(path: str, tree: bytes = b"\x0a" * 32, mode: int = 0o755) -> Entry:
    name = path.rsplit("/", 1)[-1].encode()
    return Entry(name, EntryKind.DIR, mode, 0, 1, ContentKind.TREE, tree)


def link(path: str, target: bytes) -> Entry:
    name = path.rsplit("/", 1)[-1].encode()
    return Entry(name, EntryKind.SYMLINK, 0o777, len(target), 1, ContentKind.TARGET, target)


def consistent(m: Manifest) -> Manifest:
    """Drops every entry whose folder is missing or not a folder."""
    out: Manifest = {}
    for path in sorted(m, key=lambda p: p.count("/")):
        parent = path.rpartition("/")[0]
        if not parent or (parent in out and out[parent].kind is EntryKind.DIR):
            out[path] = m[path]
    return out


@st.composite
def entry_at(draw: st.DrawFn, path: str) -> Entry:
    kind = draw(st.sampled_from([EntryKind.FILE, EntryKind.FILE, EntryKind.DIR, EntryKind.SYMLINK]))
    if kind is EntryKind.DIR:
        return folder(path, mode=draw(st.sampled_from(MODES)))
    if kind is EntryKind.SYMLINK:
        return link(path, draw(st.sampled_from([b"t1", b"t2"])))
    mtime = draw(st.integers(1, 3))
    return file(path, draw(st.sampled_from(CONTENTS)), draw(st.sampled_from(MODES)), mtime)


@st.composite
def manifests(draw: st.DrawFn) -> Manifest:
    m: Manifest = {}
    for path in PATHS:
        if draw(st.booleans()):
            m[path] = draw(entry_at(path))
    return consistent(m)


@st.composite
def changed(draw: st.DrawFn, base: Manifest) -> Manifest:
    """A side's state: each path kept, changed, deleted or added."""
    m: Manifest = {}
    for path in PATHS:
        what = draw(st.sampled_from(["keep", "keep", "keep", "change", "delete"]))
        if what == "keep" and path in base:
            m[path] = base[path]
        elif what == "change" or (what == "keep" and path not in base and draw(st.booleans())):
            m[path] = draw(entry_at(path))
    # A folder that stays a folder keeps its children unless they were deleted.
    return consistent(m)


@st.composite
def triples(draw: st.DrawFn) -> tuple[Manifest, Manifest, Manifest]:
    base = draw(manifests())
    return base, draw(changed(base)), draw(changed(base))


def result_of(ours: Manifest, plan: MergePlan) -> Manifest:
    out = dict(ours)
    for path, entry in plan.land.items():
        if entry is None:
            out.pop(path, None)
        else:
            out[path] = entry
    return out


@examples(400)
@given(triples())
def test_the_plan_follows_the_model(case: tuple[Manifest, Manifest, Manifest]) -> None:
    base, ours, theirs = case
    plan = plan_merge(base, ours, theirs)
    stopped = {c.path for c in plan.conflicts} | {j.path for j in plan.text}
    result = result_of(ours, plan)
    for path in base.keys() | ours.keys() | theirs.keys():
        b, o, t = base.get(path), ours.get(path), theirs.get(path)
        if path in stopped:
            if path in {j.path for j in plan.text}:
                assert not same(o, b) and not same(t, b) and not same(o, t)
            continue
        r = result.get(path)
        if same(t, b) or same(o, t):
            assert same(r, o), path
        elif same(o, b):
            assert same(r, t), path
    if not plan.conflicts:
        for path in result:
            parent = path.rpartition("/")[0]
            assert not parent or result[parent].kind is EntryKind.DIR, path
    # Nothing lands that ours already has.
    for path, entry in plan.land.items():
        assert not same(entry, ours.get(path)), path


# Found with --hypothesis-seed=3: ours made d/y a folder, theirs made d a symlink, and the plan
# named d/y twice (as changed here and deleted in theirs, and as lying in a non-folder).
SEED_3 = (
    {"b": folder("b", mode=0o644), "d": folder("d", mode=0o644), "d/x": file("d/x"),
     "d/y": file("d/y")},
    {"b": folder("b", mode=0o644), "d": folder("d", mode=0o644), "d/x": file("d/x"),
     "d/y": folder("d/y", mode=0o644)},
    {"b": folder("b", mode=0o644), "d": link("d", b"t1")},
)  # fmt: skip


@examples(200)
@given(triples())
@example(SEED_3)
def test_the_plan_is_symmetric_in_what_conflicts(
    case: tuple[Manifest, Manifest, Manifest],
) -> None:
    base, ours, theirs = case
    one = plan_merge(base, ours, theirs)
    other = plan_merge(base, theirs, ours)
    swap = {
        ConflictKind.MODIFY_DELETE: ConflictKind.DELETE_MODIFY,
        ConflictKind.DELETE_MODIFY: ConflictKind.MODIFY_DELETE,
    }
    for plan in (one, other):  # one path, one conflict
        assert len({c.path for c in plan.conflicts}) == len(plan.conflicts)
    assert {(c.path, c.kind) for c in one.conflicts} == {
        (c.path, swap.get(c.kind, c.kind)) for c in other.conflicts
    }
    assert {j.path for j in one.text} == {j.path for j in other.text}


def kinds(plan: MergePlan) -> dict[str, str]:
    return {c.path: str(c.kind) for c in plan.conflicts}


def test_one_sided_changes_land_and_identical_ones_converge() -> None:
    base = {"a": file("a"), "b": file("b"), "c": file("c")}
    ours = {"a": file("a", CONTENTS[1]), "b": file("b", CONTENTS[2]), "c": file("c")}
    theirs = {"a": file("a"), "b": file("b", CONTENTS[2], mtime=9), "d": file("d")}
    plan = plan_merge(base, ours, theirs)
    assert plan.land == {"c": None, "d": file("d")}
    assert not plan.conflicts and not plan.text


def test_a_text_file_changed_on_both_sides_is_a_line_merge() -> None:
    base = {"a": file("a")}
    ours = {"a": file("a", CONTENTS[1], mode=0o755)}
    theirs = {"a": file("a", CONTENTS[2])}
    plan = plan_merge(base, ours, theirs)
    assert plan.land == {} and not plan.conflicts
    (job,) = plan.text
    assert isinstance(job, TextJob) and job.entry.mode == 0o755


def test_each_conflict_kind() -> None:
    base = {
        "mm": file("mm"),
        "md": file("md"),
        "dm": file("dm"),
        "t": file("t"),
        "bin.db": replace(file("bin.db"), flags=EntryFlag.SQLITE_IMAGE),
        "l": link("l", b"x"),
        "m": file("m"),
    }
    ours = {
        "mm": file("mm", CONTENTS[1]),
        "md": file("md", CONTENTS[1]),
        "aa": file("aa", CONTENTS[1]),
        "t": folder("t"),
        "bin.db": replace(file("bin.db", CONTENTS[1]), flags=EntryFlag.SQLITE_IMAGE),
        "l": link("l", b"y"),
        "m": file("m", mode=0o600),
    }
    theirs = {
        "mm": file("mm", CONTENTS[2]),
        "dm": file("dm", CONTENTS[2]),
        "aa": file("aa", CONTENTS[2]),
        "t": link("t", b"x"),
        "bin.db": replace(file("bin.db", CONTENTS[2]), flags=EntryFlag.SQLITE_IMAGE),
        "l": link("l", b"z"),
        "m": file("m", mode=0o700),
    }
    plan = plan_merge(base, ours, theirs)
    assert kinds(plan) == {
        "md": "modify_delete",
        "dm": "delete_modify",
        "aa": "add_add",
        "t": "type_change",
        "bin.db": "modify_modify",
        "l": "modify_modify",
        "m": "modify_modify",
    }
    assert [j.path for j in plan.text] == ["mm"]


def test_mode_only_changes_land_from_either_side() -> None:
    base = {"a": file("a"), "b": file("b")}
    ours = {"a": file("a", mode=0o755), "b": file("b", CONTENTS[1])}
    theirs = {"a": file("a", CONTENTS[2]), "b": file("b", mode=0o600)}
    plan = plan_merge(base, ours, theirs)
    assert plan.land == {
        "a": file("a", CONTENTS[2], mode=0o755),
        "b": file("b", CONTENTS[1], mode=0o600),
    }


def test_git_files_are_planned_path_by_path_and_what_git_rewrites_never_conflicts() -> None:
    """(issue 21, item 6) The index both sides rewrote follows the side that moved HEAD."""
    tree = {n: bytes([n]) * 32 for n in range(10, 16)}
    base = {
        ".git": folder(".git", tree[10]),
        ".git/index": file(".git/index"),
        ".git/config": file(".git/config"),
        ".git/logs": folder(".git/logs", tree[13]),
        ".git/logs/HEAD": file(".git/logs/HEAD"),
    }

    def side(n: int, **files: Entry) -> dict[str, Entry]:
        changed = {f".git/{k.replace('__', '/')}": v for k, v in files.items()}
        logs = ".git/logs/HEAD" in changed
        return {
            **base,
            ".git": folder(".git", tree[n]),
            **({".git/logs": folder(".git/logs", tree[n + 2])} if logs else {}),
            **changed,
        }

    # Neither moved HEAD (`git status` on both sides): ours' index stays, nothing conflicts.
    ours = side(11, index=file(".git/index", CONTENTS[1]))
    theirs = side(12, index=file(".git/index", CONTENTS[2]))
    plan = plan_merge(base, ours, theirs)
    assert not plan.conflicts and not plan.text and ".git/index" not in plan.land
    # Theirs committed (its logs/HEAD moved): its index lands over ours' rewritten one.
    theirs = side(12, index=file(".git/index", CONTENTS[2]), logs__HEAD=file("HEAD", CONTENTS[2]))
    plan = plan_merge(base, ours, theirs)
    assert not plan.conflicts
    assert plan.land[".git/index"] == theirs[".git/index"]
    assert plan.land[".git/logs/HEAD"] == theirs[".git/logs/HEAD"]
    # Both moved HEAD: one conflict at .git, nothing below it planned.
    ours = side(11, index=file(".git/index", CONTENTS[1]), logs__HEAD=file("HEAD", CONTENTS[1]))
    plan = plan_merge(base, ours, theirs)
    assert kinds(plan) == {".git": "modify_modify"} and not plan.land
    # Anything else git keeps, changed on both sides, is a conflict, never a line merge.
    ours = side(11, config=file(".git/config", CONTENTS[1]))
    theirs = side(12, config=file(".git/config", CONTENTS[2]))
    plan = plan_merge(base, ours, theirs)
    assert kinds(plan) == {".git/config": "modify_modify"} and not plan.text
    # One side only: it lands.
    plan = plan_merge(base, base, theirs)
    assert plan.land == {".git/config": theirs[".git/config"]} and not plan.conflicts
    # A submodule's `.git` file changed on both sides: a conflict, not a line merge.
    sub = {"m/.git": file("m/.git"), "m": folder("m")}
    ours = {**sub, "m/.git": file("m/.git", CONTENTS[1])}
    plan = plan_merge(sub, ours, {**sub, "m/.git": file("m/.git", CONTENTS[2])})
    assert kinds(plan) == {"m/.git": "modify_modify"}


def test_adding_inside_a_folder_the_other_side_deleted_is_a_conflict() -> None:
    base = {"d": folder("d"), "d/x": file("d/x")}
    plan = plan_merge(base, {}, {**base, "d/new": file("d/new")})
    assert kinds(plan) == {"d/new": "delete_modify"}
    plan = plan_merge(base, {**base, "d/new": file("d/new")}, {})
    assert kinds(plan) == {"d/new": "modify_delete"}
    plan = plan_merge(base, {"d": file("d")}, {**base, "d/new": file("d/new")})
    assert kinds(plan) == {"d": "type_change", "d/new": "type_change"}
    # Deleting a folder the other side left alone lands, children and all.
    plan = plan_merge(base, base, {})
    assert plan.land == {"d": None, "d/x": None} and not plan.conflicts


def test_a_path_below_a_folder_the_other_side_replaced_is_one_conflict_and_the_folder_another() -> (
    None
):
    """(issue 21, item 11) Each path is named once, and the folder made a file is named too:
    it is what a user settles."""
    # Ours made d/y a folder; theirs made d a symlink (so deleted d/x and d/y).
    base = {"d": folder("d"), "d/x": file("d/x"), "d/y": file("d/y")}
    ours = {"d": folder("d"), "d/x": file("d/x"), "d/y": folder("d/y")}
    theirs = {"d": link("d", b"t1")}
    one, other = plan_merge(base, ours, theirs), plan_merge(base, theirs, ours)
    assert [(c.path, c.kind) for c in one.conflicts] == [
        ("d", ConflictKind.TYPE_CHANGE),
        ("d/y", ConflictKind.MODIFY_DELETE),
    ]
    assert [(c.path, c.kind) for c in other.conflicts] == [
        ("d", ConflictKind.TYPE_CHANGE),
        ("d/y", ConflictKind.DELETE_MODIFY),
    ]
    # Ours edited d/f.txt; theirs made d a file.
    base = {"d": folder("d"), "d/f.txt": file("d/f.txt")}
    ours = {"d": folder("d"), "d/f.txt": file("d/f.txt", CONTENTS[1])}
    theirs = {"d": file("d")}
    one, other = plan_merge(base, ours, theirs), plan_merge(base, theirs, ours)
    assert [(c.path, c.kind) for c in one.conflicts] == [
        ("d", ConflictKind.TYPE_CHANGE),
        ("d/f.txt", ConflictKind.MODIFY_DELETE),
    ]
    assert [(c.path, c.kind) for c in other.conflicts] == [
        ("d", ConflictKind.TYPE_CHANGE),
        ("d/f.txt", ConflictKind.DELETE_MODIFY),
    ]
    assert "d" not in one.land and "d" not in other.land


def test_a_database_changed_on_both_sides_says_it_is_a_database_not_a_binary_file() -> None:
    """(issue 21, item 14) The reason names what the file is."""
    from dataclasses import replace

    from tillage.core.models import EntryFlag

    def db(content: bytes) -> Entry:
        return replace(file("app.db", content), flags=EntryFlag.SQLITE_IMAGE)

    plan = plan_merge(
        {"app.db": db(CONTENTS[0])}, {"app.db": db(CONTENTS[1])}, {"app.db": db(CONTENTS[2])}
    )
    (conflict,) = plan.conflicts
    assert conflict.kind is ConflictKind.MODIFY_MODIFY and "SQLite database" in conflict.reason
