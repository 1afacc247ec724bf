"""Human-readable rendering of result documents, for people at a terminal (stdout).

The wire document is the input (the same one `--json` prints), so a person and an agent read the
same facts: sizes become KiB/MiB/GiB, times become "3 min ago", and an answer ends with the next
command to run (CONTRACT: human output is for people). Verbs with a renderer get their own page;
any field a renderer does not use, and any verb without one, falls back to a generic indented
listing, so a field added to a result is never hidden from people.

`now` is passed in (the host reads the clock or `TILLAGE_NOW`), so rendering is a pure function.
"""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.colour import PLAIN, Style
from tillage.hosts.cli.page import (
    Cell,
    Page,
    change_rows,
    change_summary,
    snapshot_cells,
    snapshot_line,
    table,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A rewind's list of changes stops after this many lines; `diff` always lists them all.
REWIND_LINES = 20


def _policy(page: Page) -> None:
    """`.tillagepolicy` lines that were skipped, one line each, where a result reports them."""
    problems = page.take("policy_problems") or []
    if problems:
        page.add(f"Skipped {units.count(len(problems), 'policy line')} (the others still apply):")
        page.add(*(policy_line(p, page.style) for p in problems))


def policy_line(problem: dict[str, Any], style: Style) -> str:
    """`  .tillagepolicy:3: `[z-a]`: bad character range` for one skipped policy line."""
    where = f"{problem.get('file')}:{problem.get('line')}"
    return f"  {style.paint(where, 'yellow')}: `{problem.get('text')}`: {problem.get('problem')}"


def _timeline(page: Page) -> None:
    snaps = page.take("snapshots") or []
    if not snaps:
        page.add("No snapshots match.")
        return
    page.add(*table([snapshot_cells(s, page.now) for s in snaps], page.style))
    more = int(page.take("more") or 0)
    if more:
        page.add(f"… {more:,} more (`till timeline -n {len(snaps) + more}` lists them all)")


def _snap(page: Page) -> None:
    page.add("Sealed " + page.snap("snapshot"))
    _policy(page)


def _watch(page: Page) -> None:
    workspace = page.take("workspace")
    stopped = page.take("stopped")
    if stopped is not None:  # `till watch --stop`
        page.used.update(("head", "watching", "attached_now", "resumed", "snapshots", "note"))
        page.used.add("policy_problems")
        if stopped:
            head = page.ref(page.doc.get("head"))
            page.add(f"Stopped the watcher of {workspace}; the head is {head}.")
        else:
            page.add(f"No watcher was running for {workspace}.")
        page.next("To watch again, run:", "till watch")
        return
    if page.take("attached_now"):
        page.add(f"Attached {workspace}")
    page.add("Sealed " + page.snap("head"))
    if page.take("watching"):
        page.add("Watching for changes: `till watch --stop` stops it.")
    page.used.update(("resumed", "snapshots"))  # a resumed timeline is told by the note
    note = page.take("note")
    if note:
        page.add(f"Note: {note}")
    _policy(page)


def _hook(page: Page) -> None:
    event = page.take("event")
    installed = page.take("installed") or []
    sealed = page.take("sealed")
    snapshot = page.take("snapshot")
    note = page.take("note")
    removed = page.take("removed") or []
    page.used.update(("workspace", "agent", "turn", "session", "tool", "settings", "watching"))
    if event == "install":
        if installed:
            page.add(f"Installed tillage's hooks ({units.count(len(installed), 'file')}):")
            page.add(*(f"  {p}" for p in installed))
        else:
            page.add("tillage's hooks were already installed; nothing was written.")
        if removed:
            page.add("Took them out of:", *(f"  {p}" for p in removed))
        if note:
            page.add(f"Note: {note}.")
    elif event == "uninstall":
        if removed:
            page.add(f"Took tillage's hooks out of {units.count(len(removed), 'file')}:")
            page.add(*(f"  {p}" for p in removed))
        else:
            page.add("No hooks of tillage were installed here; nothing was changed.")
    elif sealed:
        page.add("Sealed " + snapshot_line(snapshot, page.now, page.style))
    elif isinstance(snapshot, dict):
        page.add("Nothing changed since " + page.ref(snapshot) + "; no snapshot added.")
    elif note:  # nothing was sealed and there is no head: the folder is not attached
        page.add(f"Note: {note}")
    commit = page.take("session_commit")
    session = page.doc.get("session")
    if commit and event != "install":
        where = f" of session {session}" if session else ""
        page.add(f"Recorded as commit {page.style.paint(str(commit)[:12], 'yellow')}{where}.")


def _watcher_line(watching: Any, watcher: Any) -> str:
    """`on (pid 123, inotify, seals 500 ms after the last change)`, or why it rescans."""
    if not watching:
        return "off: `till watch` starts it (or seal with `till snap`)"
    if not isinstance(watcher, dict):
        return "on"
    how = f"pid {watcher.get('pid')}"
    if watcher.get("foreground"):
        how += ", in a terminal"
    if watcher.get("mode") == "rescan":
        unwatched = watcher.get("unwatched")
        every = watcher.get("rescan_every_s")
        cover = f" ({unwatched} unwatched, walked every {every:g} s)" if unwatched and every else ""
        return f"on ({how}), rescanning periodically: {watcher.get('reason')}{cover}"
    if watcher.get("mode") == "starting":
        return f"starting ({how}), {watcher.get('watches')} folders watched so far"
    return f"on ({how}, seals {watcher.get('debounce_ms')} ms after the last change)"


def _folder_line(folder: dict[str, Any], now: float) -> str:
    """`1,877 paths differ from the head: `till diff head``, or `at 80d3bc, rewound 5 s ago`."""
    if not folder.get("checked"):
        return str(folder.get("note") or "not checked")
    differs, at = folder.get("differs"), str(folder.get("at") or "")[:12]
    if differs == 0:
        words = "the same as the head"
    elif differs is None:
        words = "differs from the head (not counted); `till diff head` lists what"
    else:
        verb = "differs" if differs == 1 else "differ"
        words = f"{units.count(int(differs), 'path')} {verb} from the head; `till diff head`"
    if at and folder.get("rewound_at"):
        words = f"at {at}, rewound {units.when_text(str(folder['rewound_at']), now)}; " + words
    elif at and differs:
        words = f"at {at}; " + words
    return words


def _status(page: Page) -> None:
    page.take("attached")
    page.take("id")
    head = page.snap("head")
    store = page.take("store") or {}
    count = page.take("snapshots")
    watching = page.take("watching")
    watcher = page.take("watcher")
    fork = page.take("fork")
    budget = page.take("budget")
    thinned = page.take("thinned")
    rows = [
        ("Workspace", str(page.take("workspace"))),
        ("Head", head or "no snapshot yet: seal one with `till snap`"),
        ("Timeline", units.count(int(count or 0), "snapshot") + "  (`till timeline`)"),
        ("Store", f"{units.size(int(store.get('bytes') or 0))} in {store.get('path')}"),
        ("Watcher", _watcher_line(watching, watcher)),
    ]
    folder = page.take("folder")
    if isinstance(folder, dict):
        rows.insert(2, ("Folder", _folder_line(folder, page.now)))
    if isinstance(fork, dict):
        base = str(fork.get("base") or "")[:12]
        parent = fork.get("parent") or (
            f"workspace {str(fork.get('parent_workspace'))[:12]} (no longer attached)"
        )
        rows.insert(1, ("Fork", f"{fork.get('name')} of {parent}, from {base}"))
    if isinstance(budget, dict):
        from tillage.hosts.cli.human_lifecycle import budget_line

        rows.insert(4, ("Budget", budget_line(budget)))
    page.fields(rows)
    fidelity = page.take("fidelity")
    if fidelity is not None:
        _fidelity(page, fidelity, "Every path in the head snapshot is captured exactly.")
    if thinned:
        page.add(
            f"{units.count(len(thinned), 'snapshot')} thinned by gc (graded partial; "
            "`till show ID` lists what each lost):",
            *(
                f"  {t.get('short')}  lost {', '.join(t.get('classes') or [])} bytes"
                for t in thinned[:20]
            ),
        )
    if isinstance(budget, dict) and budget.get("held_by"):
        from tillage.hosts.cli.human_lifecycle import held_by

        held_by(page, list(budget["held_by"]))
    _policy(page)


def _fidelity(page: Page, notes: list[Any], exact: str) -> None:
    if not notes:
        page.add(exact)
        return
    page.add(f"Not captured exactly ({units.count(len(notes), 'path')}):")
    rows = [
        [Cell(units.printable(str(n.get("path")))), Cell(str(n.get("reason")), "dim")]
        for n in notes
    ]
    page.add(*table(rows, page.style, indent="  "))


def _show(page: Page) -> None:
    snap = page.take("snapshot") or {}
    page.take("fidelity")
    lost = page.take("missing") or []
    sealed = str(snap.get("sealed_at", ""))
    changed = page.take("changes_from_parent")
    pairs = [
        ("Snapshot", page.style.paint(str(snap.get("id")), "yellow")),
        ("Sealed", f"{units.when_text(sealed, page.now)} ({units.local_time(sealed)})"),
        ("Trigger", str(snap.get("trigger") or "")),
        ("Label", page.style.paint(str(snap.get("label") or ""), "bold")),
        (
            "Content",
            f"{units.count(int(snap.get('files') or 0), 'file')}, "
            f"{units.size(int(snap.get('bytes') or 0))}",
        ),
        ("Grade", str(snap.get("grade") or "")),
        ("Pinned", "yes: kept exact through any thinning" if snap.get("pinned") else ""),
        ("Parent", str(snap.get("parent") or "none (the first snapshot)")),
        ("Merged", str(snap.get("merged_from") or "")),
        ("Agent", str(snap.get("agent") or "")),
        ("Turn", str(snap.get("turn") or "")),
        ("Session", str(snap.get("session") or "")),
        ("Tree", page.style.paint(str(page.take("tree") or ""), "dim")),
    ]
    if changed is not None:
        since = " changed from its parent" if snap.get("parent") else " (the first: all new)"
        pairs.insert(8, ("Changes", units.count(int(changed), "path") + since))
    page.fields(pairs)
    notes = page.doc.get("fidelity")
    if notes:
        _fidelity(page, notes, "")
    if lost:
        from tillage.hosts.cli.human_lifecycle import missing

        missing(page, lost, "Thinned by gc: no longer restorable")
    parent = snap.get("parent")
    if parent and changed:
        short = snap.get("short") or str(snap.get("id"))[:12]
        page.next("See what changed:", f"till diff {parent[:12]} --to {short}")


def _diff(page: Page) -> None:
    changes = page.take("changes") or []
    origin = page.take("from_snapshot")
    dest = page.take("to_snapshot")
    stat = page.take("stat")
    patches = page.take("patches")
    source = f"from {page.ref(origin)}" if origin else "from the live folder"
    target = f"to {page.ref(dest)}" if dest else "to the live folder"
    if not changes:
        page.add(f"No changes {source} {target}.")
        return
    page.add(f"{source[0].upper()}{source[1:]} {target}: {change_summary(changes)}")
    rows, _ = change_rows(changes)
    page.add(*table(rows, page.style, indent="  "))
    if stat or patches:
        from tillage.hosts.cli.human_texts import patch_lines, stat_lines

        if patches is None and isinstance(stat, dict):
            page.add("", *stat_lines(stat, page.style))
        if patches:
            page.add("", *patch_lines(patches, page.style))


def _rewind(page: Page) -> None:
    snap = page.take("snapshot") or {}
    changes = page.take("changes") or []
    applied = page.take("applied")
    undo = page.take("undo")
    rescued = page.take("rescued") or []
    rescue = page.take("rescue")
    nxt = page.take("next")
    ref = page.ref(snap)
    rows, more = change_rows(changes, REWIND_LINES)
    listing = table(rows, page.style, indent="  ")
    if more:
        # After applying, the changes are those from the undo snapshot to the target.
        full = (
            f"{str(undo)[:12]} --to {snap.get('short')}" if applied and undo else snap.get("short")
        )
        listing.append(f"  … and {more:,} more (`till diff {full}` lists every difference)")
    unlinked = page.take("unlinked") or []
    lost = page.take("missing") or []
    if lost:
        from tillage.hosts.cli.human_lifecycle import missing

        verb = "kept" if applied else "would keep"
        missing(page, lost, f"Bytes dropped by gc: {verb} the folder's own copy")
    if not applied:
        if not changes:
            page.add(f"The folder already matches {ref}: nothing to rewind.")
            return
        page.add(f"Rewinding to {ref} would change {change_summary(changes)}", *listing)
        _unlinked(page, unlinked, "would come")
        if nxt:
            page.next("Nothing was changed. To apply it, run:", nxt)
        return
    if changes:
        page.add(f"Rewound to {ref}: {change_summary(changes)}", *listing)
    else:
        page.add(f"Rewound to {ref}: the folder already matched it.")
    _unlinked(page, unlinked, "came")
    if rescued:
        import shlex

        short = str(rescue)[:12] if rescue else "?"
        page.add(
            f"{units.count(len(rescued), 'file')} changed while rewinding, kept in snapshot "
            f"{page.style.paint(short, 'yellow')}:",
            *(f"  {units.printable(p)}" for p in rescued),
            f"Read one with `till cat {short} {shlex.quote(str(rescued[0]))}`.",
        )
    undo_cmd = nxt or (f"till rewind {undo} --yes" if undo else None)
    if undo_cmd:
        page.next("To undo it, run:", undo_cmd)


def _unlinked(page: Page, unlinked: list[str], verb: str) -> None:
    if unlinked:
        page.add(
            f"{units.count(len(unlinked), 'hard link')} {verb} back as separate files (the "
            "other name is outside the rewound paths):",
            *(f"  {units.printable(p)}" for p in unlinked),
        )


def _pin(page: Page) -> None:
    changed = page.take("changed") is not False
    page.add(("Pinned " if changed else "Pinned already: ") + page.snap("snapshot"))


def _unpin(page: Page) -> None:
    changed = page.take("changed") is not False
    page.add(("Unpinned " if changed else "Not pinned: ") + page.snap("snapshot"))


def _forget(page: Page) -> None:
    workspace = page.take("workspace")
    note = page.take("note")
    count = page.take("snapshots")
    if page.take("purged"):
        dropped = f" ({units.count(int(count), 'snapshot')})" if isinstance(count, int) else ""
        page.add(f"Forgot {workspace} and dropped its timeline{dropped} from the store.")
    elif note:
        page.add(f"Forgot {workspace}: {note}.")
    else:
        page.add(f"Forgot {workspace}: it is no longer attached; its files are untouched.")


def _verify(page: Page) -> None:
    ok = page.take("ok")
    objects = int(page.take("objects") or 0)
    problems = page.take("problems") or []
    repaired = int(page.take("repaired") or 0)
    damaged = page.take("damaged_snapshots") or []
    checked = units.count(objects, "object")
    if ok:
        page.add(f"The store is sound: {checked} checked.")
    else:
        page.add(f"The store has {units.count(len(problems), 'problem')} ({checked} checked):")
        rows = [
            [Cell(str(p.get("object"))[:12], "yellow"), Cell(str(p.get("problem")))]
            for p in problems
        ]
        page.add(*table(rows, page.style, indent="  "))
    if damaged:
        page.add(f"Damaged snapshots: {', '.join(str(d)[:12] for d in damaged)}")
    fixed = page.take("fixed") or []
    if fixed:
        page.add(f"Fixed {units.count(len(fixed), 'problem')}:")
        page.add(
            *table(
                [
                    [Cell(str(p.get("object"))[:12], "yellow"), Cell(str(p.get("problem")))]
                    for p in fixed
                ],
                page.style,
                indent="  ",
            )
        )
    packs = int(page.take("reclaimed_packs") or 0)
    if packs:
        freed = units.size(int(page.take("reclaimed_bytes") or 0))
        page.add(f"Reclaimed {units.count(packs, 'pack')} ({freed}) that killed seals left behind.")
    finished = page.take("finished_rewinds") or []
    if finished:
        page.add(f"Finished {units.count(len(finished), 'interrupted rewind')}.")
    if repaired:
        page.add(f"Repaired {units.count(repaired, 'object')}.")
    elif not ok:
        page.next("To repair what can be repaired, run:", "till verify --repair")


RENDERERS: dict[str, Callable[[Page], None]] = {
    "timeline.list": _timeline,
    "timeline.snap": _snap,
    "timeline.show": _show,
    "timeline.diff": _diff,
    "timeline.pin": _pin,
    "timeline.unpin": _unpin,
    "workspace.watch": _watch,
    "agent.hook": _hook,
    "workspace.status": _status,
    "workspace.forget": _forget,
    "workspace.rewind": _rewind,
    "store.verify": _verify,
}


# Pages of the universe verbs live in their own modules, loaded only to render that verb.
FEATURE_PAGES = {
    "system.": "tillage.hosts.cli.human_system",
    "fork.": "tillage.hosts.cli.human_forks",
    "merge.": "tillage.hosts.cli.human_merge",
    "radar.": "tillage.hosts.cli.human_radar",
    "claim.": "tillage.hosts.cli.human_radar",
    "try.": "tillage.hosts.cli.human_radar",
    "coord.": "tillage.hosts.cli.human_coord",
    "bisect.": "tillage.hosts.cli.human_bisect",
    "session.": "tillage.hosts.cli.human_sessions",
    "project.": "tillage.hosts.cli.human_project",
    "estimate.": "tillage.hosts.cli.human_estimate",
    "timeline.ls": "tillage.hosts.cli.human_texts",
    "store.gc": "tillage.hosts.cli.human_lifecycle",
    "store.retention": "tillage.hosts.cli.human_lifecycle",
    "store.budget": "tillage.hosts.cli.human_lifecycle",
    "remote.": "tillage.hosts.cli.human_sync",
    "sync.": "tillage.hosts.cli.human_sync",
    "operation.": "tillage.hosts.cli.human_oplog",
}


def renderer_for(verb: str) -> Callable[[Page], None] | None:
    """The page renderer of a verb: the ones above, or one from its feature's module."""
    found = RENDERERS.get(verb)
    if found is not None:
        return found
    for prefix, module_name in FEATURE_PAGES.items():
        if verb.startswith(prefix):
            import importlib

            pages: dict[str, Callable[[Page], None]] = importlib.import_module(
                module_name
            ).RENDERERS
            return pages.get(verb)
    return None


# -- the generic fallback --------------------------------------------------------------------


def _is_snapshot(value: Any) -> bool:
    return isinstance(value, dict) and "short" in value and "sealed_at" in value


def _is_policy_problem(value: Any) -> bool:
    return isinstance(value, dict) and {"file", "line", "text", "problem"} <= value.keys()


def _is_change(value: Any) -> bool:
    return isinstance(value, dict) and "path" in value and "kind" in value


def _empty(value: Any) -> bool:
    return value is None or value in ([], {})


def _scalar(key: str, value: Any, now: float) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and (key == "bytes" or "bytes_" in key or key.endswith("_bytes")):
        return units.size(value)
    if isinstance(value, str) and (key == "at" or key.endswith("_at")):
        return units.when_text(value, now)
    return str(value)


def generic(value: Any, now: float, style: Style, indent: str = "") -> list[str]:
    """Lists any document: one line per field, snapshots and changes one line each."""
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            label = style.paint(key.replace("_", " ") + ":", "dim")
            if _empty(item):
                continue
            if _is_snapshot(item):
                out.append(f"{indent}{label} {snapshot_line(item, now, style)}")
            elif isinstance(item, (dict, list)):
                out.append(f"{indent}{label}")
                out.extend(generic(item, now, style, indent + "  "))
            else:
                out.append(f"{indent}{label} {_scalar(key, item, now)}")
    elif isinstance(value, list):
        if value and all(_is_snapshot(v) for v in value):
            return table([snapshot_cells(v, now) for v in value], style, indent)
        if value and all(_is_change(v) for v in value):
            return table(change_rows(value)[0], style, indent)
        if value and all(_is_policy_problem(v) for v in value):
            return [indent + policy_line(v, style).strip() for v in value]
        for item in value:
            if isinstance(item, dict):
                first, *rest = generic(item, now, style, indent + "  ") or [""]
                out.append(indent + "- " + first.strip())
                out.extend(rest)
            else:
                out.append(f"{indent}- {_scalar('', item, now)}")
    elif not _empty(value):
        out.append(indent + _scalar("", value, now))
    return out


def _printable(value: Any) -> Any:
    """The document with every string made safe to print on a terminal (units.printable)."""
    if isinstance(value, str):
        return units.printable(value, lines=True)
    if isinstance(value, dict):
        return {units.printable(str(k)): _printable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable(v) for v in value]
    return value


def render(
    verb: str, document: Any, *, now: float, style: Style = PLAIN, footer: bool = True
) -> str:
    """Returns a result document as text for people, ending with a newline.

    `verb` is the contract name ("timeline.list"); `footer=False` leaves off the "run this next"
    lines (a preview shown before a confirmation prompt asks instead).
    """
    page, rest = _page(verb, _printable(document), now, style, footer)
    lines = generic(rest, now, style)
    if page is not None:
        lines = page.lines + lines + page.tail
    return "\n".join(lines) + "\n" if lines else ""


def leftover(verb: str, document: Any, *, now: float = 0.0, footer: bool = True) -> Any:
    """What `render` lists generically after the verb's page: the fields its page did not
    use (a false or zero one is left out: noise, not news), or the whole document when the
    verb has no page. Empty when the page tells everything (tests hold every page to it)."""
    rest = _page(verb, _printable(document), now, PLAIN, footer)[1]
    if isinstance(rest, dict):
        return {k: v for k, v in rest.items() if not _empty(v)}
    return rest


def _page(
    verb: str, document: Any, now: float, style: Style, footer: bool
) -> tuple[Page | None, Any]:
    renderer = renderer_for(verb)
    if renderer is None or not isinstance(document, dict):
        return None, document
    page = Page(document, now, style, footer=footer)
    renderer(page)
    rest = {k: v for k, v in document.items() if k not in page.used and v not in (False, 0)}
    return page, rest


# -- one line per item, for verbs that stream (`till events`) ------------------------------


def _event_line(doc: dict[str, Any], style: Style) -> str:
    """`   12  2026-12-01 04:31:02 UTC  sealed    3f9a0c1d2e4b manual "label"  /the/folder`"""
    found = doc.get("detail")
    detail: dict[str, Any] = found if isinstance(found, dict) else {}
    kind = str(doc.get("kind"))
    words: list[str] = []
    if detail.get("short"):
        words.append(style.paint(str(detail["short"]), "yellow"))
    if kind == "rewound":
        words.insert(0, "to")
        if detail.get("paths"):
            words.append("paths " + " ".join(str(p) for p in detail["paths"]))
        if detail.get("undo"):
            words.append(f"(undo {str(detail['undo'])[:12]})")
    elif kind == "sealed":
        words.append(str(detail.get("trigger")))
        if detail.get("label"):
            words.append(f'"{detail["label"]}"')
        words += [f"{k}={detail[k]}" for k in ("agent", "turn", "session") if detail.get(k)]
    elif kind in _UNIVERSE_WORDS:
        words += _UNIVERSE_WORDS[kind](detail)
    else:
        words += [f"{k}={v}" for k, v in detail.items() if k not in ("snapshot", "short")]
    cursor = str(doc.get("cursor")).rjust(6)
    when = units.local_time(str(doc.get("at")))
    where = style.paint(str(doc.get("workspace") or doc.get("workspace_id") or "?"), "dim")
    return f"{cursor}  {when}  {kind.ljust(9)} {' '.join(words)}  {where}"


def _short(value: Any) -> str:
    return str(value)[:12] if value else "?"


def _conflict_words(detail: dict[str, Any]) -> list[str]:
    places = [str(f) for f in detail.get("forks") or []]
    if detail.get("workspace"):
        places.append("the workspace")
    return [str(detail.get("state") or "?"), str(detail.get("path")), "in", ", ".join(places)]


# The words after the kind of an event about universes (its detail's main facts, short IDs).
_UNIVERSE_WORDS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "forked": lambda d: [
        str(d.get("name")),
        "from",
        _short(d.get("base")),
        "at",
        str(d.get("root")),
    ],
    "fork_removed": lambda d: [str(d.get("name")), "last state", _short(d.get("snapshot"))],
    "merged": lambda d: [
        str(d.get("name") or _short(d.get("snapshot"))),
        units.count(int(d["changes"]), "change") if isinstance(d.get("changes"), int) else "",
        "into",
        _short(d.get("result")),
    ],
    "conflict": _conflict_words,
    "claimed": lambda d: [str(d.get("pattern")), "by", str(d.get("owner"))],
    "released": lambda d: [str(d.get("pattern")), "by", str(d.get("owner"))],
    "session": lambda d: [
        str(d.get("action")),
        str(d.get("session")),
        *([f'"{str(d["description"]).splitlines()[0]}"'] if d.get("description") else []),
        *(
            [units.count(int(d["changed_files"]), "file") + " changed"]
            if d.get("action") == "commit" and isinstance(d.get("changed_files"), int)
            else []
        ),
        *([units.count(int(d["commits"]), "commit")] if isinstance(d.get("commits"), int) else []),
    ],
}


def _fork_snapshot_line(doc: dict[str, Any], style: Style) -> str:
    """`3f9a0c1d2e4b  2026-12-01 04:31:02 UTC  watch  12 files  3.0 KiB  "label"  fork alpha`:
    a followed fork's snapshot (`till watch-fork`), its time as a time: the stream is live."""
    from tillage.hosts.cli.page import snapshot_cells

    cells = snapshot_cells(doc, 0.0)
    cells[1].text = units.local_time(str(doc.get("sealed_at")))  # the age column, as a time
    words = [style.paint(c.text.strip(), *c.styles) for c in cells if c.text]
    words += [f"{k}={doc[k]}" for k in ("agent", "turn", "session") if doc.get(k)]
    return "  ".join([*words, style.paint(f"fork {doc.get('fork')}", "dim")])


def _follow_line(doc: dict[str, Any], style: Style) -> str:
    from tillage.hosts.cli.human_sync import follow_line

    return follow_line(doc, style)


LINE_RENDERERS: dict[str, Callable[[dict[str, Any], Style], str]] = {
    "workspace.events": _event_line,
    "fork.watch": _fork_snapshot_line,
    "sync.run": _follow_line,  # `till sync --follow`: one cycle a line
}


def line(verb: str, document: Any, style: Style = PLAIN) -> str:
    """Returns one item of a streaming verb's output as one line for people (no newline).

    Every string of the document is escaped before it is painted (never after: the colour's
    own escapes would be shown as text); a newline or tab left in it (a description's, whose
    first line a renderer picks) is escaped at the end, so an item stays one line."""
    document = _printable(document)
    renderer = LINE_RENDERERS.get(verb)
    if renderer is None or not isinstance(document, dict):
        return " ".join(generic(document, 0.0, style)).strip()
    return renderer(document, style).replace("\n", "\\n").replace("\t", "\\t")
