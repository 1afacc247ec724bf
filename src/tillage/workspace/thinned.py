"""What a thinned snapshot can no longer restore (its content classes past their byte window,
dropped by a gc), and how a rewind goes around it: every path it still has is restored, and
the live copy of each path whose bytes are gone is left as it is."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from tillage.core import codec
from tillage.core.classes import BYTE_WINDOWS, ClassRules, class_of
from tillage.core.models import ContentKind, Entry, EntryKind, is_hole
from tillage.core.paths import covers
from tillage.errors import IntegrityError
from tillage.workspace.policy import POLICY_FILE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tillage.store.store import Store


@dataclass(frozen=True)
class Missing:
    """A path a thinned snapshot lists but can no longer restore, its class, and why."""

    path: str
    cls: str
    reason: str


def reason_for(cls: str) -> str:
    window = BYTE_WINDOWS.get(cls)
    days = "" if window is None else f" (kept {window // 86_400_000_000_000} days after a seal)"
    return f"its {cls} bytes were dropped by gc{days}"


def class_rules(store: Store, want: dict[str, Entry]) -> ClassRules:
    """The class rules of the `.tillagepolicy` a snapshot holds (its own, not the live one)."""
    entry = want.get(POLICY_FILE)
    if entry is None or entry.content_kind is not ContentKind.CHUNK:
        return ClassRules.EMPTY
    try:
        return ClassRules.of_policy(store.read(entry.content))
    except IntegrityError:
        return ClassRules.EMPTY


def missing_paths(store: Store, snapshot_id: str, want: dict[str, Entry]) -> list[Missing]:
    """The files of `want` (a snapshot's manifest, whole or scoped) whose bytes a gc dropped:
    their class was thinned from the snapshot and their content is no longer in the store."""
    dropped = store.thinned_classes(snapshot_id)
    if not dropped:
        return []
    rules = class_rules(store, want)
    candidates: list[tuple[str, str, Entry]] = []
    for path, entry in want.items():
        if entry.kind is not EntryKind.FILE or entry.content_kind not in (
            ContentKind.CHUNK,
            ContentKind.BLOB,
        ):
            continue
        cls = class_of(path, rules)
        if cls in dropped:
            candidates.append((path, cls, entry))
    have = store.locations(list({e.content for _p, _c, e in candidates}))
    gone: list[Missing] = []
    for path, cls, entry in candidates:
        if not _whole(store, entry, have):
            gone.append(Missing(path, cls, reason_for(cls)))
    return gone


def _whole(store: Store, entry: Entry, have: Container[bytes]) -> bool:
    if entry.content not in have:
        return False
    if entry.content_kind is ContentKind.CHUNK:
        return True
    try:
        _size, refs = codec.decode_blob(store.read(entry.content))
    except IntegrityError:
        return False
    chunks = [r.id for r in refs if not is_hole(r)]
    return len(store.locations(chunks)) == len(set(chunks))


def spare_missing(
    store: Store, snapshot_id: str, live: dict[str, Entry], want: dict[str, Entry]
) -> tuple[dict[str, Entry], tuple[Missing, ...]]:
    """`want` with every path whose bytes are gone replaced by what the folder holds there (so
    a rewind leaves it as it is), and those paths."""
    gone = missing_paths(store, snapshot_id, want)
    if not gone:
        return want, ()
    spared = dict(want)
    folders: list[str] = []
    for item in gone:
        del spared[item.path]
        here = live.get(item.path)
        if here is not None:
            spared[item.path] = here
            if here.kind is EntryKind.DIR:
                folders.append(item.path)  # a folder where the file was: keep all of it
    for path, entry in live.items():
        if any(covers(folder, path) for folder in folders):
            spared[path] = entry
    return spared, tuple(gone)
