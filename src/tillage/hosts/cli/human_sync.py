"""Human pages of the sync verbs (hosts/cli/human.py loads this module by verb prefix): what a
push sent, what a pull did and what to run next, and — from `remote add` — where the new key a
person must keep was written (never the key itself)."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.colour import Style
from tillage.hosts.cli.page import Cell, Page, table

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
        rescued = doc.get("rescued") or []
        if rescued:
            short = _short(doc.get("rescue"))
            page.add(
                f"{units.count(len(rescued), 'file')} changed while it landed, kept in snapshot "
                f"{page.style.paint(short, 'yellow')}:",
                *(f"  {units.printable(str(p))}" for p in rescued),
                f"Read one with `till cat {short} PATH`.",
            )
        if doc.get("undo"):
            page.next("To undo it, run:", f"till rewind {_short(doc['undo'])} --yes")
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
    cells = []
    for row in rows:
        name = units.printable(str(row.get("ref") or "(a ref this machine cannot name)"))
        problem = row.get("problem")
        told = ""
        if problem:
            seen = row.get("seen_version")
            told = _PROBLEMS.get(str(problem), str(problem))
            told += f" (saw v{seen})" if seen is not None else ""
        pushed = row.get("snapshot")
        cells.append(
            [
                Cell(name, "bold"),
                Cell(f"v{row.get('version')}" if pushed else "", "dim", right=True),
                Cell(_short(pushed) if pushed else "", "yellow"),
                Cell(units.when_text(str(row.get("pushed_at") or ""), page.now) if pushed else ""),
                Cell(told, "red"),
            ]
        )
    page.add(*table(cells, page.style))
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


def _remote_list(page: Page) -> None:
    remotes: list[dict[str, Any]] = page.take("remotes") or []
    if not remotes:
        page.add("No remotes.")
        page.next("Add one (a folder, or an ssh:// or s3:// URL):", "till remote add URL")
        return
    rows = [
        [
            Cell(units.printable(str(r.get("name"))), "bold"),
            Cell(units.printable(str(r.get("remote")))),
            Cell(
                ""
                if r.get("clone_url") == r.get("remote")
                else f"clone from {units.printable(str(r.get('clone_url')))}",
                "dim",
            ),
        ]
        for r in remotes
    ]
    page.add(*table(rows, page.style))
    page.next("Send this workspace there:", "till sync --push")


def _work(page: Page) -> None:
    doc = _taken(page)
    code = doc.get("exit_code")
    ran = f"{doc.get('ref')} ({_short(doc.get('input'))})"
    verdict = page.style.paint(f"exited {code}", "green" if code == 0 else "red")
    # Its output was passed on live, above this page: it is not printed a second time.
    page.add(f"Ran the command on {ran}: it {verdict}.")
    page.add(
        f"Pushed the result {_short(doc.get('result'))} to {doc.get('result_ref')}: "
        f"{units.count(int(doc.get('uploaded_objects') or 0), 'object')} "
        f"({units.size(int(doc.get('uploaded_bytes') or 0))}, encrypted)."
    )
    if doc.get("folder"):
        page.add(f"Its folder is kept at {units.printable(str(doc['folder']))}.")


def _problem_rows(problems: list[dict[str, Any]]) -> list[list[Cell]]:
    return [
        [Cell(_short(p.get("object")), "yellow"), Cell(units.printable(str(p.get("problem"))))]
        for p in problems
    ]


def _remote_check(page: Page) -> None:
    doc = _taken(page)
    counted = (
        f"{units.count(int(doc.get('packs') or 0), 'pack')}, "
        f"{units.count(int(doc.get('blobs') or 0), 'blob')}, "
        f"{units.count(int(doc.get('refs') or 0), 'ref')}"
    )
    problems = doc.get("problems") or []
    unindexed = int(doc.get("unindexed_packs") or 0)
    if doc.get("ok"):
        page.add(f"Remote {doc.get('remote')} is sound: {counted} checked.")
    else:
        page.add(
            f"Remote {doc.get('remote')} has {units.count(len(problems), 'problem')} "
            f"({counted} checked):"
        )
        page.add(*table(_problem_rows(problems), page.style, indent="  "))
    if unindexed:
        page.add(f"{units.count(unindexed, 'pack')} not in the remote's index yet.")
    if not doc.get("ok"):
        page.next("To repair what can be repaired, run:", "till remote repair")


def _remote_repair(page: Page) -> None:
    doc = _taken(page)
    problems = doc.get("problems") or []
    done = [
        (doc.get("salvaged_objects"), "object", "salvaged from damaged packs"),
        (doc.get("resent_objects"), "object", "sent again from this machine"),
        (doc.get("reindexed_packs"), "pack", "indexed again"),
        (doc.get("removed_packs"), "damaged pack", "removed"),
        (doc.get("removed_indexes"), "stale index", "removed"),
    ]
    if not problems and not any(int(n or 0) for n, _w, _d in done):
        page.add(f"Remote {doc.get('remote')} is sound: nothing to repair.")
    else:
        page.add(f"Repaired remote {doc.get('remote')}:")
        if problems:
            page.add(f"Found {units.count(len(problems), 'problem')}:")
            page.add(*table(_problem_rows(problems), page.style, indent="  "))
        for n, word, did in done:
            if int(n or 0):
                page.add(f"  {units.count(int(n or 0), word)} {did}")
    lost = doc.get("unrepaired") or []
    if lost:
        page.add(f"{units.count(len(lost), 'object')} could not be repaired from here:")
        rows = [
            [
                Cell(_short(u.get("object")), "yellow"),
                Cell(f"ref {units.printable(str(u.get('ref')))}"),
                Cell(
                    "pushed by this machine"
                    if u.get("this_machine")
                    else f"pushed by {u.get('pushed_by') or 'an unknown machine'}",
                    "dim",
                ),
            ]
            for u in lost
        ]
        page.add(*table(rows, page.style, indent="  "))
    if doc.get("next"):
        page.add(f"Next: {doc['next']}.")


def _remote_rekey(page: Page) -> None:
    doc = _taken(page)
    page.add(f"Rekeyed remote {doc.get('remote')}: the old recovery key opens it no more.")
    written = doc.get("key_file")
    if written:
        # As `remote add`: the key is in its file, never on the page.
        page.add(
            "The new key was written to this file, which only you can read:",
            f"  {page.style.paint(units.printable(str(written)), 'bold')}",
            "Copy it to every machine that syncs with this remote, and keep a copy safe.",
        )
    else:
        page.add("It opens with the new key you gave; every machine that syncs needs it.")


def _short(value: Any) -> str:
    return str(value)[:12] if value else "?"


def follow_line(doc: dict[str, Any], style: Style) -> str:
    """One cycle of `till sync --follow`: `cycle 3  2026-12-01 14:02:11 UTC  origin/main
    pulled up_to_date  pushed 3f9a0c1d2e4b (3 objects, 1.2 KiB)`."""
    words = [f"cycle {doc.get('cycle')}", units.local_time(str(doc.get("at")))]
    words.append(style.paint(f"{doc.get('remote')}/{doc.get('ref')}", "dim"))
    error = doc.get("error")
    if isinstance(error, dict):
        retry = units.duration(float(doc.get("retry_in") or 0))
        hint = f" ({error.get('next')})" if error.get("next") else ""
        words.append(style.paint(f"error: {error.get('message')}{hint}", "red"))
        words.append(f"next cycle in {retry}")
        return "  ".join(words)
    if doc.get("pulled"):
        fetched = int(doc.get("fetched_objects") or 0)
        got = f" ({units.count(fetched, 'object')})" if fetched else ""
        words.append(f"pulled {doc.get('pulled')}{got}")
    if doc.get("merged"):
        words.append(f"merged {style.paint(_short(doc.get('merged')), 'yellow')}")
    if doc.get("pushed"):
        sent = units.count(int(doc.get("uploaded_objects") or 0), "object")
        size = units.size(int(doc.get("uploaded_bytes") or 0))
        words.append(f"pushed {style.paint(_short(doc.get('pushed')), 'yellow')} ({sent}, {size})")
    if doc.get("paused"):
        conflicts = [str(c) for c in doc.get("conflicts") or []]
        shown = ", ".join(conflicts[:5]) + (
            f" and {len(conflicts) - 5} more" if conflicts[5:] else ""
        )
        words.append(style.paint(f"paused: {units.count(len(conflicts), 'conflict')}", "red"))
        if shown:
            words.append(shown)
        if doc.get("next_step"):
            words.append(f"then: {doc.get('next_step')}")
    return "  ".join(words)


RENDERERS: dict[str, Callable[[Page], None]] = {
    "remote.list": _remote_list,
    "sync.work": _work,
    "remote.check": _remote_check,
    "remote.repair": _remote_repair,
    "remote.rekey": _remote_rekey,
    "remote.add": _remote_add,
    "remote.refs": _remote_refs,
    "remote.repair_ref": _repair_ref,
    "sync.run": _sync,
    "sync.clone": _clone,
}
