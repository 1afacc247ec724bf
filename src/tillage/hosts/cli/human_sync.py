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
        page.next(
            "Copy that file to the other machine (chmod 600 there), then run:",
            f"till clone {url} --key-file {shlex.quote(str(written))}",
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
        nxt = doc.get("next")
        if nxt:
            page.next("Land it (three-way), then push:", str(nxt))


def _clone(page: Page) -> None:
    doc = _taken(page)
    head = doc.get("head") or {}
    folder = units.printable(str(doc.get("workspace")))
    files = units.count(int(head.get("files") or 0), "file")
    source = f"{doc.get('remote')} ({doc.get('ref')})"
    page.add(f"Cloned {source} into {folder}: {head.get('short')}, {files}.")
    page.next("Keep both machines current:", "till sync --follow")


RENDERERS: dict[str, Callable[[Page], None]] = {
    "remote.add": _remote_add,
    "sync.run": _sync,
    "sync.clone": _clone,
}
