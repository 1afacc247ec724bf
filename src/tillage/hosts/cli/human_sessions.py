"""Human pages of the session verbs (hosts/cli/human.py loads this module by verb prefix):
a session's commits, its changelog, diffs, reverts and cleanup, for people at a terminal."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.human import REWIND_LINES
from tillage.hosts.cli.page import Cell, Page, change_rows, change_summary, command, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _quote(word: str) -> str:
    """A session ID as a shell word (shlex.quote without importing re at start-up)."""
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_"
    if word and all(ch in safe for ch in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def _short(commit: dict[str, Any]) -> str:
    return str(commit.get("short") or str(commit.get("id", ""))[:12])


def _content(commit: dict[str, Any]) -> str:
    """The folder at a commit: `12 files, 3.4 KiB`."""
    files = units.count(int(commit.get("file_count") or 0), "file")
    return f"{files}, {units.size(int(commit.get('total_size') or 0))}"


def _what(commit: dict[str, Any]) -> str:
    """`started: 12 files, 3.4 KiB` for a baseline, else `2 files changed, +1.2 KiB`."""
    if commit.get("is_baseline"):
        return f"started: {_content(commit)}"
    changed = int(commit.get("changed_files") or 0)
    if not changed:
        return "no file changed"
    size = int(commit.get("changed_total_size") or 0)
    return f"{units.count(changed, 'file')} changed, +{units.size(size)}"


def _cells(commit: dict[str, Any], now: float) -> list[Cell]:
    return [
        Cell(_short(commit), "yellow"),
        Cell(units.when_text(str(commit.get("created_at", "")), now)),
        Cell(_what(commit), "cyan" if commit.get("is_baseline") else ""),
        Cell(units.printable(_first_line(commit)), "bold"),
    ]


def _first_line(commit: dict[str, Any]) -> str:
    text = str(commit.get("description") or "").strip()
    return text.splitlines()[0] if text else ""


def _ref(page: Page, commit: Any) -> str:
    """A commit named in a sentence: `df995107e34c (3 min ago, "step one")`."""
    if not isinstance(commit, dict):
        return "?"
    facts = [units.when_text(str(commit.get("created_at", "")), page.now)]
    if _first_line(commit):
        facts.append(f'"{units.printable(_first_line(commit))}"')
    return f"{page.style.paint(_short(commit), 'yellow')} ({', '.join(facts)})"


def _commit(page: Page) -> None:
    commit: dict[str, Any] = page.take("commit") or {}
    added, ended = page.take("added"), page.take("ended")
    page.take("sealed")
    started_before = page.take("already_started")
    session = str(commit.get("session"))
    quoted = _quote(session)
    if added and commit.get("is_baseline"):
        page.add(f"Started session {session} at {_ref(page, commit)}: {_content(commit)}.")
    elif added:
        page.add(f"Recorded {_ref(page, commit)} in session {session}: {_what(commit)}.")
    elif started_before:
        page.add(
            f"Session {session} was already started; its newest commit is "
            f"{_ref(page, commit)}; nothing sealed."
        )
    else:
        page.add(f"Nothing changed since {_ref(page, commit)}; no commit added.")
    if ended:
        page.add(f"Session {session} is ended.")
        page.next("Read its changelog:", f"till session changelog {quoted}")
    elif added and not commit.get("is_baseline"):
        page.next("See what it changed:", f"till session diff {_short(commit)}")
    else:
        page.next(
            "After the next step of work, record it:", f"till session record {quoted} -m DESC"
        )


def _log(page: Page) -> None:
    session = str(page.take("session"))
    commits: list[dict[str, Any]] = page.take("commits") or []
    if not commits:
        page.add(f"Session {session} has no commits. Start it with:")
        page.add(command(f"till session start {_quote(session)}", page.style))
        return
    page.add(*table([_cells(c, page.now) for c in commits], page.style))
    page.next("Read its changelog:", f"till session changelog {_quote(session)}")


def _sessions(page: Page) -> None:
    found: list[dict[str, Any]] = page.take("sessions") or []
    if not found:
        page.add("No sessions. Start one with:")
        page.add(command("till session start NAME", page.style))
        return
    rows = [
        [
            Cell(units.printable(str(s.get("id"))), "bold"),
            Cell(units.count(int(s.get("commits") or 0), "commit"), right=True),
            Cell("updated " + units.when_text(str(s.get("updated_at", "")), page.now)),
            Cell("ended" if s.get("ended") else "", "dim"),
            Cell(f"head {str(s.get('head'))[:12]}", "dim"),
        ]
        for s in found
    ]
    page.add(*table(rows, page.style))
    page.next(
        "Read the newest one's changelog:",
        f"till session changelog {_quote(str(found[0].get('id')))}",
    )


def _diff(page: Page) -> None:
    changes: list[dict[str, Any]] = page.take("changes") or []
    origin = page.take("from_commit")
    dest: dict[str, Any] = page.take("to_commit") or {}
    if origin is None:
        session = dest.get("session")
        page.add(f"{_ref(page, dest)} is the baseline of session {session}: it changed nothing.")
        return
    span = f"From {_ref(page, origin)} to {_ref(page, dest)}"
    if not changes:
        page.add(f"{span}: no changes.")
        return
    page.add(f"{span}: {change_summary(changes)}")
    rows, _ = change_rows(changes)
    page.add(*table(rows, page.style, indent="  "))


def _revert(page: Page) -> None:
    target: dict[str, Any] = page.take("reverted_to") or {}
    backup = page.take("commit")
    changes: list[dict[str, Any]] = page.take("changes") or []
    applied = page.take("applied")
    undo = page.take("undo")
    nxt = page.take("next")
    page.take("restored")
    where = f"{_ref(page, target)} of session {target.get('session')}"
    rows, more = change_rows(changes, REWIND_LINES)
    listing = table(rows, page.style, indent="  ")
    if more:
        listing.append(f"  … and {more:,} more (`till session diff` lists every difference)")
    if not applied:
        if not changes:
            page.add(f"The folder already matches {where}: nothing to revert.")
            return
        page.add(f"Reverting to {where} would change {change_summary(changes)}", *listing)
        if nxt:
            page.next("Nothing was changed. To apply it, run:", str(nxt))
        return
    if changes:
        page.add(f"Reverted to {where}: {change_summary(changes)}", *listing)
    else:
        page.add(f"Reverted to {where}: the folder already matched it.")
    if isinstance(backup, dict):
        page.add(f"The state before is kept as commit {_ref(page, backup)}.")
    if nxt or undo:
        page.next("To undo it, run:", str(nxt or f"till rewind {undo} --yes"))


def _cleanup(page: Page) -> None:
    removed: list[str] = page.take("removed") or []
    commits = int(page.take("commits_removed") or 0)
    dry = page.take("dry_run")
    nxt = page.take("next")
    page.used.update(("max_age_days", "max_sessions"))
    if not removed:
        page.add("No session is old enough or beyond the count to keep: nothing removed.")
        return
    names = ", ".join(units.printable(s) for s in removed)
    counted = f"{units.count(len(removed), 'session')} ({units.count(commits, 'commit')})"
    if dry:
        page.add(f"Would remove {counted}: {names}.")
        page.add("Only their commit records would go: no file and no snapshot changes.")
        page.next(
            "Nothing was removed. To remove them, run:",
            str(nxt or "till session cleanup --yes"),
        )
        return
    page.add(f"Removed {counted}: {names}.")
    page.add("Their snapshots stay in the timeline (`till timeline --session ID`).")


def _changelog(page: Page) -> None:
    session = str(page.take("session"))
    commits: list[dict[str, Any]] = page.take("commits") or []
    ended = page.take("ended")
    if not commits:
        page.add(f"Session {session} has no commits. Start it with:")
        page.add(command(f"till session start {_quote(session)}", page.style))
        return
    state = "ended" if ended else "open"
    first, last = commits[0], commits[-1]
    span = units.when_text(str(first.get("created_at", "")), page.now)
    page.add(
        page.style.paint(f"Session {units.printable(session)}", "bold")
        + f": {units.count(len(commits), 'commit')}, started {span}, {state}"
    )
    for commit in commits:
        stamp = str(commit.get("created_at", ""))
        when = f"{units.when_text(stamp, page.now)} ({units.local_time(stamp)})"
        page.add("", f"{page.style.paint(_short(commit), 'yellow')}  {when}  {_what(commit)}")
        text = str(commit.get("description") or "").strip()
        for line in text.splitlines() or [""]:
            if line:
                page.add("    " + page.style.paint(units.printable(line), "bold"))
        changes = commit.get("changes") or []
        if changes:
            rows, _ = change_rows(changes)
            page.add(*table(rows, page.style, indent="      "))
    total = sum(int(c.get("changed_files") or 0) for c in commits)
    page.add(
        "", f"In all: {units.count(total, 'file change')} since the baseline; head {_short(last)}."
    )
    page.next(
        "See one commit's changes, or put the folder back to one:",
        f"till session revert {_short(last)} --dry-run",
    )


RENDERERS: dict[str, Callable[[Page], None]] = {
    "session.start": _commit,
    "session.record": _commit,
    "session.end": _commit,
    "session.log": _log,
    "session.list": _sessions,
    "session.diff": _diff,
    "session.revert": _revert,
    "session.cleanup": _cleanup,
    "session.changelog": _changelog,
}
