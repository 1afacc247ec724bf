"""Human pages of the fork verbs (hosts/cli/human.py loads this module by verb prefix)."""

from __future__ import annotations

from collections.abc import Callable

from tillage.hosts.cli import units
from tillage.hosts.cli.page import Cell, Page, command, table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DRIVER_WORDS = {
    "reflink": "reflinked (shares its blocks until written)",
    "copy_file_range": "copied in the kernel",
    "copy": "copied",
}


def _short(value: Any) -> str:
    return str(value)[:12] if value else "-"


def _status_line(page: Page, exit_code: Any, what: str) -> None:
    if exit_code is None:
        return
    colour = "green" if exit_code == 0 else "red"
    page.add(f"{what} exited {page.style.paint(str(exit_code), colour)}.")


def _fork(page: Page) -> None:
    info: dict[str, Any] = page.take("fork") or {}
    name, path = info.get("name"), info.get("path")
    if info.get("created"):
        size = units.size(int(info.get("bytes") or 0))
        files = units.count(int(info.get("files") or 0), "file")
        how = DRIVER_WORDS.get(str(info.get("driver")), str(info.get("driver")))
        seconds = float(info.get("seconds") or 0)
        took = f"{seconds:.2f} s" if seconds < 10 else units.duration(seconds)
        page.add(f"Forked {name} at {path}")
        own_port = f"; PORT={info['port']}" if info.get("port") is not None else ""
        page.add(f"  {files}, {size} {how} in {took}; base {_short(info.get('base'))}{own_port}")
    else:
        page.add(f"Ran in fork {name} at {path}")
    if info.get("exit_code") is not None:
        index, port = info.get("index"), info.get("port")
        page.add(f"  TILLAGE_FORK={name} TILLAGE_FORK_INDEX={index} PORT={port}")
        _status_line(page, info.get("exit_code"), "The command")
        page.add(f"Sealed the fork as {_short(info.get('head'))}.")
        base = _short(info.get("base"))
        page.next("See what it changed, then land it:", f"till diff {base} --to {name}")
    else:
        page.next(f"Work in it, then land it with `till merge {name}`:", f"cd {path}")


def _forks(page: Page) -> None:
    forks: list[dict[str, Any]] = page.take("forks") or []
    if not forks:
        page.add("No forks. Make one with:")
        page.add(command("till fork NAME", page.style))
        return
    rows = []
    for f in forks:
        disk = (
            "missing"
            if f.get("missing")
            else (units.size(int(f["disk_bytes"])) if f.get("disk_bytes") is not None else "-")
        )
        conflicts = f.get("conflicts") or []
        rows.append(
            [
                Cell(str(f.get("name")), "bold"),
                Cell(units.when_text(str(f.get("created_at", "")), page.now)),
                Cell(f"base {_short(f.get('base'))}", "dim"),
                Cell(f"PORT={f['port']}" if f.get("port") is not None else "", "dim"),
                Cell(units.count(int(f.get("changed_paths") or 0), "change"), right=True),
                Cell(disk, "red" if f.get("missing") else "", right=True),
                Cell(
                    units.count(len(conflicts), "conflict") if conflicts else "",
                    "red",
                ),
                Cell(str(f.get("path")), "dim"),
            ]
        )
    page.add(*table(rows, page.style))
    first = str(forks[0].get("name"))
    page.next("Land one with a check, e.g.:", f"till merge {first} --check 'make test'")


def _fork_rm(page: Page) -> None:
    name = page.take("name")
    snap = page.take("snapshot")
    files = int(page.take("files_removed") or 0)
    removed = page.take("removed")
    kept = page.take("kept_files")
    path = page.take("path")
    released = page.take("claims_released") or []
    page.take("workspace")  # the fork's timeline, for machines (`till undo` restores it)
    short = _short(snap.get("id")) if isinstance(snap, dict) else "-"
    if not removed:
        page.add(f"Removing fork {name} would delete {path} ({units.count(files, 'file')}).")
        page.next("To remove it, run:", f"till fork-rm {name} --yes")
        return
    if kept:
        page.add(f"Retired fork {name}; its folder {path} was left on disk.")
    else:
        page.add(f"Removed fork {name}: {units.count(files, 'file')} deleted.")
    page.add(f"Its last state is snapshot {short}.")
    if released:
        page.add(f"Released {units.count(len(released), 'claim')} taken in it.")
    page.next("To bring it back as it was, run:", f"till fork {name} --at {short}")


def _exec(page: Page) -> None:
    plan = page.take("plan")
    universes: list[dict[str, Any]] = page.take("universes") or []
    if isinstance(plan, dict):
        count = int(plan.get("count") or 0)
        how = DRIVER_WORDS.get(str(plan.get("driver")), str(plan.get("driver")))
        page.add(
            f"{units.count(count, 'universe')} would each get "
            f"{units.count(int(plan.get('files') or 0), 'file')}, "
            f"{units.size(int(plan.get('bytes') or 0))} {how}; about "
            f"{units.size(int(plan.get('extra_disk_bytes') or 0))} more on disk. Nothing was made."
        )
        page.next("To run them:", f"till exec -n {count} -- CMD")
        return
    rows = [
        [
            Cell(str(u.get("fork")), "bold"),
            Cell(
                f"exit {u.get('exit_code')}",
                "green" if u.get("exit_code") == 0 else "red",
            ),
            Cell(f"PORT={u.get('port')}", "dim"),
            Cell(f"head {_short(u.get('head'))}", "dim"),
            Cell(str(u.get("path")), "dim"),
        ]
        for u in universes
    ]
    page.add(f"Ran in {units.count(len(universes), 'universe')}:")
    page.add(*table(rows, page.style, indent="  "))
    failed = [u for u in universes if u.get("exit_code") != 0]
    best = next((u for u in universes if u.get("exit_code") == 0), None)
    if best is not None:
        page.next("Land a passing one:", f"till merge {best.get('fork')}")
    elif failed:
        page.next("Every command failed; look at the first in:", f"cd {failed[0].get('path')}")


RENDERERS: dict[str, Callable[[Page], None]] = {
    "fork.create": _fork,
    "fork.run": _fork,
    "fork.list": _forks,
    "fork.remove": _fork_rm,
    "fork.exec": _exec,
}


def kept_lines(details: dict[str, Any]) -> list[str]:
    """One line per universe an interrupted command sealed (`universes`, or `fork` alone)."""
    kept = details.get("universes")
    if not isinstance(kept, list):
        kept = [details["fork"]] if isinstance(details.get("fork"), dict) else []
    return [
        f"  sealed {u.get('name')} as {str(u.get('head') or '-')[:12]} at {u.get('path')}\n"
        for u in kept
        if isinstance(u, dict)
    ]
