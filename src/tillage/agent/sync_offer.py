"""The pairing a harness offers a person, never performs: the commands that put one folder on
two machines. Pairing makes the workspace's recovery key, and a secret that passes through a
tool result has been written into a transcript; so the offer is commands, the person runs
them, and the key never enters a tool result. The key travels as a file (`--key-file`, 0600),
never in a command line (seen by `ps`, kept in shell history). Pure: text in, text out."""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass

KEY_SUFFIX = ".tillage-key"  # the key file the offer names: ~/NAME.tillage-key


@dataclass(frozen=True)
class SyncOffer:
    """`here`: what to run on the machine holding the folder, as text (one command a line);
    `there`: on the machine that should receive it, reading the key from the file `here`
    writes (`key_file`, copied over by the person: this seam never has the key);
    `here_commands`/`there_commands`: the same, one command each; `note`: the honest edge, for
    someone who reads only this."""

    workspace: str
    name: str
    remote: str
    here: str
    there: str
    here_commands: tuple[str, ...]
    there_commands: tuple[str, ...]
    note: str
    key_file: str = ""

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
    # `~/` left unquoted so the shell expands it; the file's own name quoted.
    key_file = "~/" + shlex.quote(shared.replace("/", "-") + KEY_SUFFIX)
    here = (
        f"till --repo {ws} remote add {url} --name {nm} --key-file {key_file}",
        f"till --repo {ws} sync --push",
        f"till --repo {ws} sync --follow",
    )
    there = (
        f"till clone {url} {nm} --key-file {key_file}",
        f"till --repo {nm} sync --follow",
    )
    note = (
        f"Run these yourself; nothing here was run. `till remote add` writes the workspace's "
        f"new recovery key to {key_file} (readable by you alone): it is the only thing that "
        "can read the encrypted copy, so keep a copy somewhere safe and copy the file to the "
        "other machine (e.g. with scp; chmod 600 there); it is never shown to an agent. "
        "The remote sees only ciphertext under hashed names. If both machines change the "
        "folder, a pull reports `diverged` and changes nothing until one side is merged."
    )
    return SyncOffer(
        workspace,
        shared,
        remote,
        "\n".join(here),
        "\n".join(there),
        here,
        there,
        note,
        key_file,
    )
