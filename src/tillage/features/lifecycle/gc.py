"""The store's lifecycle: which snapshots a gc keeps, which bytes they keep, and reclaiming the
rest (the sweep itself is `store/sweep.py`).

A gc decides first and reclaims after (INV-14): under the store's exclusive maintenance lock it
applies the retention schedule to every timeline, thins the bytes of content classes whose
window has passed, marks every object a kept snapshot still needs, publishes its decision as one
`gc` fact, and only then sweeps. A gc killed after the fact leaves garbage the next gc finds; a
gc killed before it leaves nothing changed.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field

from tillage.core import codec
from tillage.core.classes import BYTE_WINDOWS, ClassRules, class_of
from tillage.core.models import ContentKind, EntryFlag, EntryKind, is_hole
from tillage.core.progress import ProgressFn, meter
from tillage.core.retention import DEFAULT, Retention, survivors, tightened
from tillage.platform import clock, failpoints
from tillage.platform.locks import SHARED_WAIT
from tillage.store.lost import lost_snapshots
from tillage.store.sweep import REWRITE_THRESHOLD, plan, store_bytes, sweep
from tillage.workspace import pathindex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from tillage.store.store import Store
    from tillage.workspace.pathindex import PathIndex

# Snapshots that exist so a step can be undone: kept whole while younger than the keep-all window
# whatever the schedule says.
UNDO_TRIGGERS = frozenset(("pre_rewind", "pre_merge", "try_before"))
POLICY_NAME = b".tillagepolicy"


@dataclass(frozen=True)
class GcOutcome:
    """What a gc removed (or, dry, would remove)."""

    dry_run: bool
    snapshots_removed: int
    snapshots_thinned: int
    objects_removed: int
    packs_rewritten: int
    bytes_reclaimed: int
    store_bytes_before: int
    store_bytes_after: int
    removed: tuple[str, ...] = ()
    thinned: tuple[str, ...] = ()

    def plus(self, later: GcOutcome) -> GcOutcome:
        """This gc followed by `later` (budget enforcement runs several)."""
        return GcOutcome(
            dry_run=self.dry_run,
            snapshots_removed=self.snapshots_removed + later.snapshots_removed,
            snapshots_thinned=len(set(self.thinned) | set(later.thinned)),
            objects_removed=self.objects_removed + later.objects_removed,
            packs_rewritten=self.packs_rewritten + later.packs_rewritten,
            bytes_reclaimed=self.bytes_reclaimed + later.bytes_reclaimed,
            store_bytes_before=self.store_bytes_before,
            store_bytes_after=later.store_bytes_after,
            removed=self.removed + later.removed,
            thinned=tuple(sorted(set(self.thinned) | set(later.thinned))),
        )


@dataclass(frozen=True)
class Protected:
    """Snapshots a gc never removes, and the ones that keep every byte (`whole`), with why."""

    kept: dict[str, str]
    whole: frozenset[str]


def retention_of(store: Store) -> Retention:
    """The store's retention policy (the defaults until `till retention` sets one)."""
    saved = store.settings().get("retention")
    return DEFAULT if not saved else Retention.from_json(saved)


def protected(store: Store, now_ns: int, policy: Retention) -> Protected:
    """The snapshots no gc removes: every timeline's head, pins, bases of live forks, the
    snapshots of each session's first and newest commit, undo points younger than the keep-all
    window, anything an unfinished rewind or merge names, and what a sync ref names. Heads,
    pins, fork bases, intents and sync refs keep all their bytes (a fork merges against its
    base; an intent is finished from its target; a sync continues from its ref)."""
    kept: dict[str, str] = {}
    whole: set[str] = set()
    conn = store.conn

    def add(ids: Iterable[tuple[str | None]], why: str, *, all_bytes: bool) -> None:
        for (snapshot,) in ids:
            if snapshot is None:
                continue
            kept.setdefault(snapshot, why)
            if all_bytes:
                whole.add(snapshot)

    add(
        conn.execute(
            "SELECT (SELECT id FROM snapshots s WHERE s.workspace = w.workspace "
            "ORDER BY sealed_at_ns DESC, seq DESC LIMIT 1) FROM "
            "(SELECT DISTINCT workspace FROM snapshots) w"
        ),
        "head",
        all_bytes=True,
    )
    add(
        conn.execute(
            "SELECT (SELECT id FROM snapshots s WHERE s.workspace = w.workspace "
            "ORDER BY seq DESC LIMIT 1) FROM (SELECT DISTINCT workspace FROM snapshots) w"
        ),
        "head",
        all_bytes=True,
    )
    add(conn.execute("SELECT snapshot FROM pins"), "pinned", all_bytes=True)
    add(
        conn.execute("SELECT base FROM forks WHERE removed_ns IS NULL"),
        "fork_base",
        all_bytes=True,
    )
    # A session's ends: its first commit (where it began: its baseline) and its newest (what
    # the next record diffs against). Its commits between follow the schedule like any
    # snapshot (issue 26: hooks commit every turn); their records stay in the log.
    add(
        conn.execute(
            "SELECT c.snapshot FROM session_commits c JOIN (SELECT workspace, session, "
            "MIN(seq) AS first, MAX(seq) AS last FROM session_commits "
            "GROUP BY workspace, session) e ON c.workspace = e.workspace "
            "AND c.session = e.session AND c.seq IN (e.first, e.last)"
        ),
        "session",
        all_bytes=False,
    )
    marks = ",".join("?" * len(UNDO_TRIGGERS))
    since = now_ns - policy.keep_all if policy.keep_all >= 0 else -(1 << 62)  # FOREVER: all
    add(
        conn.execute(
            f"SELECT id FROM snapshots WHERE trigger IN ({marks}) AND sealed_at_ns >= ?",
            (*sorted(UNDO_TRIGGERS), since),
        ),
        "undo",
        all_bytes=False,
    )
    add(((s,) for s in _named_by_intents(store)), "intent", all_bytes=True)
    # What a sync ref names: the next push or pull starts from it (the remote's side, and the
    # local snapshot holding the same folder).
    add(conn.execute("SELECT snapshot FROM sync_refs"), "sync_ref", all_bytes=True)
    add(conn.execute("SELECT local FROM sync_refs"), "sync_ref", all_bytes=True)
    return Protected(kept, frozenset(whole))


def _named_by_intents(store: Store) -> set[str]:
    """Every snapshot ID an unfinished rewind, merge or fork intent names."""
    found: set[str] = set()
    try:
        names = os.listdir(store.intents_dir)
    except FileNotFoundError:
        return found
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(store.intents_dir / name, "rb") as f:
                doc = json.loads(f.read())
        except (OSError, ValueError):
            continue
        stack: list[object] = [doc]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, str) and len(item) == 64:
                found.add(item)
    return found


@dataclass
class _Plan:
    """A gc's decision before it is published."""

    removed: list[str] = field(default_factory=list)
    thinned: dict[str, list[str]] = field(default_factory=dict)  # snapshot -> classes it loses
    live: set[bytes] = field(default_factory=set)


_DIR, _FILE = int(EntryKind.DIR), int(EntryKind.FILE)
_CHUNK, _BLOB = int(ContentKind.CHUNK), int(ContentKind.BLOB)
_HARDLINK = int(EntryFlag.HARDLINK)

# A folder of a thinned walk: its tree, its path prefix, the classes dropped, and which class
# rules (by identity: parsed rules are shared, and kept alive by the marker).
_Node = tuple[bytes, str, frozenset[str], int]


class _Marker:
    """Walks kept snapshots' trees once per distinct subtree (iteratively: a tree may be deeper
    than Python's recursion), collecting the objects they need; a file whose class is dropped
    from a snapshot does not keep its bytes, but every tree is kept (so a thinned snapshot
    still lists what it held)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.live: set[bytes] = set()
        self._full: set[bytes] = set()  # trees walked with every byte kept
        # A thinned folder: the (class, content) of its own dropped files, and its subfolders.
        self._nodes: dict[_Node, tuple[tuple[tuple[str, bytes], ...], tuple[_Node, ...]]] = {}
        self._rules: dict[bytes, ClassRules] = {}
        self._blobs: set[bytes] = set()
        self._classes: dict[tuple[int, str], str] = {}
        self._rule_sets: dict[int, ClassRules] = {}

    def _refs(self, tree: bytes) -> list[codec.TreeRef]:
        self.live.add(tree)
        return codec.tree_refs(self.store.read(tree))

    def _keep_content(self, content_kind: int, content: bytes) -> None:
        if content_kind == _CHUNK:
            self.live.add(content)
        elif content_kind == _BLOB:
            self.live.add(content)
            if content not in self._blobs:
                self._blobs.add(content)
                _size, refs = codec.decode_blob(self.store.read(content))
                self.live.update(r.id for r in refs if not is_hole(r))

    def keep_indexed(self, index: PathIndex) -> None:
        """Marks what a workspace's path index names: its next seal reuses those rows and trees
        without reading the files again (INV-8), so they must outlive any snapshot that held
        them (a rewind leaves its target's content there, and that target may be thinned or
        removed). Naming an ID live costs nothing when it is gone already; only a blob is read
        (for its chunks), and one that cannot be is left to that seal to read again."""
        from tillage.errors import TillageError
        from tillage.workspace.pathindex import readable_rows, readable_trees

        self.live.update(readable_trees(index))
        for row in readable_rows(index):
            content_kind, content = row[7], row[8]
            if not content:
                continue
            try:
                self._keep_content(content_kind, content)
            except TillageError:  # a blob the store no longer reads: nothing of it to keep
                continue

    def rules(self, tree: bytes) -> ClassRules:
        """The class rules of the `.tillagepolicy` a snapshot's root tree holds."""
        found = self._rules.get(tree)
        if found is not None:
            return found
        rules = ClassRules.EMPTY
        for name, _kind, _flags, content_kind, content in codec.tree_refs(self.store.read(tree)):
            if name == POLICY_NAME and content_kind == _CHUNK:
                rules = ClassRules.of_policy(self.store.read(content))
        self._rules[tree] = rules
        return rules

    def keep_all(self, tree: bytes) -> None:
        """Marks a tree and everything below it."""
        stack = [tree]
        while stack:
            t = stack.pop()
            if t in self._full:
                continue
            self._full.add(t)
            for _name, kind, flags, content_kind, content in self._refs(t):
                if kind == _DIR:
                    stack.append(content)
                elif kind == _FILE and not flags & _HARDLINK:
                    self._keep_content(content_kind, content)

    def keep_thinned(
        self, tree: bytes, dropped: frozenset[str], rules: ClassRules
    ) -> set[tuple[str, bytes]]:
        """Marks a tree, keeping the bytes of files whose class is not `dropped`; returns the
        (class, content ID) of the files whose class is (what the snapshot loses unless another
        kept snapshot holds the same bytes)."""
        lost: set[tuple[str, bytes]] = set()
        seen: set[_Node] = set()
        self._rule_sets[id(rules)] = rules
        stack: list[_Node] = [(tree, "", dropped, id(rules))]
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            own, children = self._node(node)
            lost.update(own)
            stack.extend(children)
        return lost

    def _node(self, node: _Node) -> tuple[tuple[tuple[str, bytes], ...], tuple[_Node, ...]]:
        done = self._nodes.get(node)
        if done is not None:
            return done
        tree, prefix, dropped, rules_id = node
        if tree in self._full:
            return (), ()  # marked whole already: everything below it is live
        own: list[tuple[str, bytes]] = []
        children: list[_Node] = []
        for name, kind, flags, content_kind, content in self._refs(tree):
            path = prefix + name.decode("utf-8", "surrogateescape")
            if kind == _DIR:
                children.append((content, path + "/", dropped, rules_id))
            elif kind == _FILE and not flags & _HARDLINK:
                cls = self._class(rules_id, path)
                if cls not in dropped:
                    self._keep_content(content_kind, content)
                elif content_kind in (_CHUNK, _BLOB):
                    own.append((cls, content))
        done = (tuple(own), tuple(children))
        self._nodes[node] = done
        return done

    def _class(self, rules_id: int, path: str) -> str:
        key = (rules_id, path)
        found = self._classes.get(key)
        if found is None:
            found = self._classes[key] = class_of(path, self._rule_sets[rules_id])
        return found


def _windows(step: int) -> dict[str, int | None]:
    """Each class's byte window, halved `step` times (budget enforcement tightens them)."""
    return {c: (None if w is None else w >> step) for c, w in BYTE_WINDOWS.items()}


def decide(
    store: Store,
    now_ns: int,
    policy: Retention,
    *,
    step: int = 0,
    on_progress: ProgressFn | None = None,
) -> _Plan:
    """Which snapshots go, which lose which classes of bytes, and every object still needed
    (`on_progress` hears the kept snapshots marked, one by one)."""
    rules_policy = tightened(policy, step)
    # The protected set is the configured policy's: a budget tightens the schedule, never it.
    guard = protected(store, now_ns, policy)
    rows = store.conn.execute(
        "SELECT id, workspace, sealed_at_ns FROM snapshots ORDER BY seq"
    ).fetchall()
    timelines: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for snapshot, workspace, sealed in rows:
        timelines[workspace].append((snapshot, sealed))
    result = _Plan()
    kept: list[tuple[str, int]] = []
    for sealed in timelines.values():
        keep = survivors(sealed, now_ns, rules_policy)
        for snapshot, at in sealed:
            if snapshot in keep or snapshot in guard.kept:
                kept.append((snapshot, at))
            else:
                result.removed.append(snapshot)
    windows = _windows(step)
    already = {
        r[0]: frozenset(json.loads(r[1]))
        for r in store.conn.execute("SELECT snapshot, classes FROM thinned")
    }
    marker = _Marker(store)
    thinning: list[tuple[str, bytes, frozenset[str], frozenset[str]]] = []
    tally = meter(on_progress, "marking", len(kept), unit="snapshot")
    for snapshot, at in kept:
        if tally is not None:
            tally.add()
        row = store.snapshot(snapshot)
        assert row is not None
        marker.live.add(bytes.fromhex(snapshot))
        tree = bytes.fromhex(row.tree)
        before = already.get(snapshot, frozenset())
        age = now_ns - at
        due = frozenset(c for c, w in windows.items() if w is not None and age > w)
        dropped = (due - {"source", "vcs", "config", "lockfile"}) | before
        if (snapshot in guard.whole and not before) or not dropped:
            marker.keep_all(tree)
        else:
            thinning.append((snapshot, tree, dropped, before))
    # What each workspace's path index names: its next seal reuses it unread.
    for (workspace,) in store.conn.execute("SELECT id FROM workspaces").fetchall():
        marker.keep_indexed(pathindex.load(store, workspace))
    # A snapshot a pack holds but the log lost (store/lost.py) is taken back by `till watch` in
    # its folder or by `verify --repair`: until then a gc keeps every byte of it, or the
    # timeline those commands promise would be swept before they run.
    for _at, snapshot, record in lost_snapshots(store, None):
        marker.live.add(bytes.fromhex(snapshot))
        marker.keep_all(bytes.fromhex(record.tree))
    # The whole ones first: a subtree one of them holds is all live, so a thinned walk that
    # meets it need not read it again (most of an old snapshot is what the head still holds).
    candidates: list[tuple[str, frozenset[str], set[tuple[str, bytes]]]] = []
    for snapshot, tree, dropped, before in thinning:
        lost = marker.keep_thinned(tree, dropped, marker.rules(tree))
        if dropped - before:
            candidates.append((snapshot, dropped - before, lost))
    for snapshot, new, lost in candidates:
        # Graded partial only for the classes it really lost bytes of: a class it holds no
        # file of, or whose bytes another kept snapshot still holds, costs it nothing.
        gone = {cls for cls, content in lost if cls in new and content not in marker.live}
        if gone:
            result.thinned[snapshot] = sorted(gone)
    result.live = marker.live
    return result


def collect(
    store: Store,
    *,
    dry_run: bool,
    step: int = 0,
    threshold: float = REWRITE_THRESHOLD,
    reason: str = "retention",
    wait: float = SHARED_WAIT,
    on_progress: ProgressFn | None = None,
) -> GcOutcome:
    """Runs one gc over the whole store: retention, byte windows, then the sweep; busy when
    other operations keep the store for more than `wait` seconds. `on_progress` hears its
    stages: the kept snapshots marked, then the packs swept."""
    if not dry_run:
        store.require_writable()
    # A dry run changes nothing: it only keeps a gc from changing the store under it.
    with store.sharing(timeout=wait) if dry_run else store.maintaining(timeout=wait):
        store.catch_up()
        if not dry_run:
            store.settle_index()  # measured as it will stay (a dry run touches nothing)
        before = store_bytes(store.home)
        now_ns = clock.now_ns()
        decided = decide(store, now_ns, retention_of(store), step=step, on_progress=on_progress)
        if dry_run:
            swept = plan(store, decided.live, threshold=threshold)
            return GcOutcome(
                True,
                len(decided.removed),
                len(decided.thinned),
                swept.objects_removed,
                swept.packs_rewritten,
                swept.bytes_reclaimed,
                before,
                max(0, before - swept.bytes_reclaimed),
                tuple(decided.removed),
                tuple(sorted(decided.thinned)),
            )
        if decided.removed or decided.thinned:
            store.publish(
                "gc",
                {
                    "removed": decided.removed,
                    "thinned": [
                        {"snapshot": s, "classes": c} for s, c in sorted(decided.thinned.items())
                    ],
                    "reason": reason,
                    "now_ns": now_ns,
                },
            )
        failpoints.hit("gc.after_publish")
        swept = sweep(store, decided.live, threshold=threshold, on_progress=on_progress)
        store.settle_index()
        after = store_bytes(store.home)
    return GcOutcome(
        False,
        len(decided.removed),
        len(decided.thinned),
        swept.objects_removed,
        swept.packs_rewritten,
        max(0, before - after),
        before,
        after,
        tuple(decided.removed),
        tuple(sorted(decided.thinned)),
    )
