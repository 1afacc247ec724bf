"""The pairing a harness offers a person, never performs: the commands that put one folder on
two machines. Pairing prints the workspace's recovery key, and a secret that passes through a
tool result has been written into a transcript; so the offer is commands, the person runs
them, and the key never enters a tool result. Pure: text in, text out."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass

KEY_PLACEHOLDER = "<RECOVERY-KEY printed by `till remote add` on the first machine>"


@dataclass(frozen=True)
class SyncOffer:
    """`here`: what to run on the machine holding the folder, as text (one command a line);
    `there`: on the machine that should receive it, with a placeholder for the key this seam
    never has; `here_commands`/`there_commands`: the same, one command each; `note`: the
    honest edge, for someone who reads only this."""

    workspace: str
    name: str
    remote: str
    here: str
    there: str
    here_commands: tuple[str, ...]
    there_commands: tuple[str, ...]
    note: str

    def __str__(self) -> str:
        return (
            f"On this machine:\n{_indent(self.here)}\n"
            f"On the other machine:\n{_indent(self.there)}\n{self.note}"
        )


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def offer(workspace: str, remote: str, name: str | None = None) -> SyncOffer:
    """The offer for syncing `workspace` through `remote` (a directory, ssh://host/path, or
    s3://bucket/prefix), under a shared name (default: the folder's name)."""
    remote = remote.strip()
    if not remote:
        raise ValueError("a remote is needed: a directory, ssh://host/path or s3://bucket")
    shared = name or posixpath.basename(workspace.rstrip("/")) or "workspace"
    ws, url, nm = shlex.quote(workspace), shlex.quote(remote), shlex.quote(shared)
    here = (
        f"till --repo {ws} remote add {url} --name {nm}",
        f"till --repo {ws} sync --push",
        f"till --repo {ws} sync --follow",
    )
    there = (
        f"till clone {url} {nm} --key {KEY_PLACEHOLDER}",
        f"till --repo {nm} sync --follow",
    )
    note = (
        "Run these yourself; nothing here was run. `till remote add` prints the workspace's "
        "recovery key once: it is the only thing that can read the encrypted copy, so keep it "
        "somewhere safe and type it on the other machine; it is never shown to an agent. "
        "The remote sees only ciphertext under hashed names. If both machines change the "
        "folder, a pull reports `diverged` and changes nothing until one side is merged."
    )
    return SyncOffer(
        workspace, shared, remote, "\n".join(here), "\n".join(there), here, there, note
    )
