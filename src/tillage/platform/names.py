"""Random names for new files, packs and workspaces.

`os.urandom` is what `secrets.token_hex` calls; importing `secrets` (and with it `hmac`,
`hashlib` and `random`) would cost every `till` process milliseconds for nothing.
"""

from __future__ import annotations

import os


def random_hex(nbytes: int) -> str:
    """Returns `nbytes` of cryptographically strong randomness as hex."""
    return os.urandom(nbytes).hex()
