"""Reading trees back into flat manifests, file contents back as bytes, and writing trees; the
process-wide cache of decoded trees a seal reuses."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Iterator, Sequence

from tillage.core import codec
from tillage.core.codec import Kind
from tillage.core.ids import tree_id
from tillage.core.models import ChunkRef, ContentKind, Entry, EntryKind, is_hole
from tillage.core.nesting import run_nested
from tillage.core.paths import covers, fs_decode, join
from tillage.store.store import ObjectWriter, Store


class TreeCache:
    """Decoded trees by ID, for a process that seals the same workspace again and again (the
    watcher): a seal told which names changed takes a folder's other entries from the tree the
    last seal made, and a tree ID names its content, so a cached tree is never stale. Bounded
    by the entries it holds; the oldest trees go first."""

    def __init__(self, max_entries: int = 200_000) -> None:
        import threading
        from collections import OrderedDict

        self.max_entries = max_entries
        self._trees: OrderedDict[bytes, tuple[Entry, ...]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self.enabled = False  # only a long-lived process turns it on

    def get(self, tid: bytes) -> tuple[Entry, ...] | None:
        with self._lock:
            entries = self._trees.get(tid)
            if entries is not None:
                self._trees.move_to_end(tid)
            return entries

    def put(self, tid: bytes, entries: Sequence[Entry]) -> None:
        if not self.enabled or len(entries) > self.max_entries // 4:
            return
        with self._lock:
            if tid in self._trees:
                self._trees.move_to_end(tid)
                return
            self._trees[tid] = tuple(entries)
            self._held += len(entries)
            while self._held > self.max_entries:
                _old, dropped = self._trees.popitem(last=False)
                self._held -= len(dropped)


TREES = TreeCache()


def flatten(
    store: Store, root: bytes, scopes: Sequence[str] | None = None, *, prefix: str = ""
) -> dict[str, Entry]:
    """Returns every entry below the tree `root` (the folder at `prefix`), keyed by workspace
    path. With `scopes`, only the folders that lead to a scope or lie in one are read: the
    result holds every entry within the scopes and the entries of every folder above them,
    which is all a rewind of those paths or a read of one file looks at."""
    out: dict[str, Entry] = {}
    stack: list[tuple[str, bytes]] = [(prefix, root)]
    while stack:
        folder, tid = stack.pop()
        for entry in codec.decode_tree(store.read(tid)):
            path = join(folder, fs_decode(entry.name))
            out[path] = entry
            if entry.kind is EntryKind.DIR and reaches(path, scopes):
                stack.append((path, entry.content))
    return out


def cache_trees(store: Store, root: bytes, cache: TreeCache) -> None:
    """Reads every tree below `root` into `cache` (a long-lived process warming up)."""
    stack = [root]
    while stack:
        tid = stack.pop()
        cached = cache.get(tid)
        entries = list(cached) if cached is not None else codec.decode_tree(store.read(tid))
        if cached is None:
            cache.put(tid, entries)
        stack.extend(e.content for e in entries if e.kind is EntryKind.DIR)


def reaches(folder: str, scopes: Sequence[str] | None) -> bool:
    """Tells whether `folder` lies in a scope or above one (None: everything is in scope)."""
    return scopes is None or any(covers(s, folder) or covers(folder, s) for s in scopes)


def chunks_of(store: Store, entry: Entry) -> list[ChunkRef]:
    """Returns the chunks holding a file entry's bytes, in order."""
    if entry.content_kind is ContentKind.CHUNK:
        return [ChunkRef(entry.content, entry.size)]
    if entry.content_kind is ContentKind.BLOB:
        _size, refs = codec.decode_blob(store.read(entry.content))
        return refs
    return []


# Zeros handed out for a hole at a time: a reader of a sparse 1 TiB file holds at most this much.
HOLE_PIECE = 1 << 20
_ZEROS = bytes(HOLE_PIECE)


def iter_file_chunks(store: Store, entry: Entry) -> Iterator[bytes]:
    """Yields a file entry's bytes in order, one stored chunk at a time (each verified as it is
    read), and a hole (format.md: a zero chunk ID) as zeros in pieces of at most HOLE_PIECE, so
    a streaming reader's memory is bounded by the largest chunk, never by the file."""
    for ref in chunks_of(store, entry):
        if is_hole(ref):
            left = ref.length
            while left:
                piece = min(left, HOLE_PIECE)
                yield _ZEROS if piece == HOLE_PIECE else bytes(piece)
                left -= piece
        else:
            yield store.read(ref.id)


def read_file_bytes(store: Store, entry: Entry) -> bytes:
    """Returns a (small enough to hold) file entry's whole content, holes as zeros."""
    return b"".join(iter_file_chunks(store, entry))


def write_manifest(writer: ObjectWriter, manifest: dict[str, Entry]) -> bytes:
    """Writes `manifest` as trees (directories' own entries re-pointed) and returns the root."""
    children: dict[str, list[str]] = defaultdict(list)
    for path in manifest:
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        children[parent].append(path)

    # Each folder yields its subfolders' paths and is sent their trees, on an explicit stack
    # (core/nesting.py): any depth.
    def build(dir_path: str) -> Generator[str, bytes | None, bytes]:
        entries = []
        for path in children.get(dir_path, []):
            entry = manifest[path]
            if entry.kind is EntryKind.DIR:
                sub = yield path
                assert sub is not None  # the subfolder's tree
                entry = Entry(
                    entry.name,
                    entry.kind,
                    entry.mode,
                    entry.size,
                    entry.mtime_ns,
                    ContentKind.TREE,
                    sub,
                    entry.xattrs,
                    entry.flags,
                )
            entries.append(entry)
        encoded = codec.encode_tree(entries)
        tid = tree_id(encoded)
        writer.put(Kind.TREE, tid, encoded)
        return tid

    return run_nested(build(""), build)


def check_file(store: Store, entry: Entry) -> None:
    """Raises the store's integrity error if a file entry's bytes cannot all be read back: every
    chunk present and whole (a small file is read and verified outright). Lets a door that
    streams a file refuse before it has printed a byte."""
    from tillage.store.errors import StoreDamagedError

    refs = [ref for ref in chunks_of(store, entry) if not is_hole(ref)]
    if len(refs) == 1:
        store.read(refs[0].id)
        return
    for ref in refs:
        loc = store.location(ref.id)
        if loc is None or not store.intact(ref.id, loc):
            raise StoreDamagedError(f"object {ref.id.hex()[:12]} is missing or damaged")
