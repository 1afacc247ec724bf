"""Remote names: where a sealed thing lives on the remote, a keyed hash of what it is.

The name is keyed BLAKE3 (the recovery key's name subkey) of `kind NUL ident`, so object IDs,
ref names and lease holders never leave the machine in the clear, and someone without the key
cannot even tell whether two remotes hold the same object.
"""

from __future__ import annotations

from blake3 import blake3

from tillage.crypto.keys import RecoveryKey

__all__ = ["KINDS", "name_of"]

# kind -> folder on the remote. Objects are fanned out by their name's first byte, so no
# folder of a directory remote grows past a few thousand entries per million objects.
# (Format 1's objects; format 2 keeps data in `packs/` and `index/` under random names.)
KINDS = {"object": "objects", "ref": "refs", "lease": "leases", "segment": "history"}


def name_of(key: RecoveryKey, kind: str, ident: str) -> str:
    """Returns the remote name of `ident` (an object's hex ID, a ref's name, a lease's ref):
    `objects/ab/ab…` (64 hex) for kind "object", `refs/<hex>`, `leases/<hex>`, `history/<hex>`
    (a sealed segment of a ref's older heads)."""
    folder = KINDS.get(kind)
    if folder is None:
        raise ValueError(f"unknown kind of remote name: {kind!r}")
    digest = blake3(f"{kind}\0{ident}".encode(), key=key._name).hexdigest()
    if kind == "object":
        return f"{folder}/{digest[:2]}/{digest}"
    return f"{folder}/{digest}"
