"""Human pages of the sync verbs (hosts/cli/human.py loads this module by verb prefix): what a
push sent, what a pull did and what to run next, and — from `remote add` — where the new key a
person must keep was written (never the key itself)."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Page

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _taken(page: Page) -> dict[str, Any]:
    doc = dict(page.doc)
    for key in doc:
        page.take(key)
    return doc


def _remote_add(page: Page) -> None:
    doc = _taken(page)
    page.add(f"Added remote {doc.get('name')}: {units.printable(str(doc.get('remote')))}")
    written = doc.get("key_file")
    if written:
        # The key itself is never on the page (a screen is shared, a scrollback kept): the
        # file holds it, and every command shown names the file.
        path = units.printable(str(written))
        page.add(
            "",
            "A new recovery key was written to this file, which only you can read:",
            f"  {page.style.paint(path, 'bold')}",
            "Keep a copy somewhere safe: without it nothing on the remote can be read, by",
            "anyone, ever.",
            "",
        )
        url = shlex.quote(str(doc.get("clone_url")))
        dest = shlex.quote(str(doc.get("clone_dest") or "clone"))
        page.add("Send this workspace there first: `till sync --push`.")
        page.next(
            "Then copy that file to the other machine (chmod 600 there), and run there:",
            f"till clone {url} {dest} --key-file {shlex.quote(str(written))}",
        )
    else:
        page.next("Send this workspace there:", "till sync --push")


def _sync(page: Page) -> None:
    doc = _taken(page)
    where = f"{doc.get('remote')}/{doc.get('ref')}"
    if "disposition" not in doc:
        snap = doc.get("snapshot") or {}
        sent = int(doc.get("uploaded_objects") or 0)
        if not sent:
            page.add(f"{where} already holds {snap.get('short')}: nothing to send.")
            return
        page.add(
            f"Pushed {snap.get('short')} to {where}: {units.count(sent, 'object')} "
            f"({units.size(int(doc.get('uploaded_bytes') or 0))}, encrypted), "
            f"{int(doc.get('reused_objects') or 0):,} already there."
        )
        return
    incoming = str(doc.get("remote_snapshot") or "")[:12]
    state = doc.get("disposition")
    if state == "up_to_date":
        page.add(f"Up to date with {where} ({incoming}).")
    elif state in ("fast_forwarded", "bootstrapped"):
        verb = "Fast-forwarded to" if state == "fast_forwarded" else "Took"
        fetched = units.size(int(doc.get("fetched_bytes") or 0))
        page.add(f"{verb} {incoming} from {where} ({fetched} fetched).")
    else:
        page.add(
            f"Diverged: {where} moved to {incoming} while this folder changed too. "
            "Nothing in the folder was changed; the incoming snapshot is kept here."
        )
        nxt = str(doc.get("next") or "")
        first, _, other = nxt.partition(" (or ")
        if other:  # a ref never synced here: take the remote's state, or merge it
            short = " ".join(w[:12] if len(w) == 64 else w for w in other.rstrip(")").split())
            page.add(f"To merge it three-way: `{short}`.")
        if first:
            intro = "Or take the remote's state (this folder's is sealed first):"
            page.next(intro if other else "Land it (three-way), then push:", first)


def _clone(page: Page) -> None:
    doc = _taken(page)
    head = doc.get("head") or {}
    folder = units.printable(str(doc.get("workspace")))
    files = units.count(int(head.get("files") or 0), "file")
    source = f"{doc.get('remote')} ({doc.get('ref')})"
    page.add(f"Cloned {source} into {folder}: {head.get('short')}, {files}.")
    page.next("Keep both machines current:", "till sync --follow")


_PROBLEMS = {
    "damaged": "DAMAGED: its head does not open",
    "rolled_back": "ROLLED BACK: older than this machine saw",
    "missing": "MISSING: this machine saw it, the remote lost it",
}


def _remote_refs(page: Page) -> None:
    doc = _taken(page)
    rows = doc.get("refs") or []
    if not rows:
        page.add(f"{doc.get('remote')} holds no ref yet.")
        page.next("Send this workspace there:", "till sync --push")
        return
    for row in rows:
        name = units.printable(str(row.get("ref") or "(a ref this machine cannot name)"))
        problem = row.get("problem")
        if row.get("snapshot"):
            when = units.when_text(str(row.get("pushed_at") or ""), page.now)
            line = f"{name}  v{row.get('version')}  {str(row.get('snapshot'))[:12]}  {when}"
        else:
            line = name
        if problem:
            seen = row.get("seen_version")
            line += f"  {_PROBLEMS.get(str(problem), str(problem))}"
            line += f" (saw v{seen})" if seen is not None else ""
        page.add(line)
    broken = [r for r in rows if r.get("problem") in ("damaged", "missing")]
    if broken:
        ref = broken[0].get("ref") or "REF"
        page.next("Rewrite it from what this machine saw:", f"till remote repair-ref --ref {ref}")


def _repair_ref(page: Page) -> None:
    doc = _taken(page)
    where = f"{doc.get('remote')}/{doc.get('ref')}"
    snap = str(doc.get("snapshot"))[:12]
    if doc.get("repaired"):
        page.add(
            f"Repaired {where} ({doc.get('problem')}): it holds {snap} again, as version "
            f"{doc.get('version')}."
        )
    else:
        page.add(f"{where} is sound (version {doc.get('version')}, {snap}): nothing written.")


RENDERERS: dict[str, Callable[[Page], None]] = {
    "remote.add": _remote_add,
    "remote.refs": _remote_refs,
    "remote.repair_ref": _repair_ref,
    "sync.run": _sync,
    "sync.clone": _clone,
}
