"""tillage: seal, rewind and fork whole workspaces; the library behind the `till` command.

The public API is what `__all__` names. It never prints, never exits and never reads the
environment: the caller says where the store is (`home`) and which folder it means (`folder`).
Names are loaded lazily so `import tillage` stays cheap for the command line.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = [
    "AmbiguousError",
    "BusyError",
    "ConfirmationRequiredError",
    "IntegrityError",
    "InvalidArgumentError",
    "NotAttachedError",
    "NotFoundError",
    "TillageError",
    "__version__",
    "call",
    "contracts",
]

_ERRORS = frozenset(name for name in __all__ if name.endswith("Error"))

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tillage.api import call, contracts
    from tillage.errors import (
        AmbiguousError,
        BusyError,
        ConfirmationRequiredError,
        IntegrityError,
        InvalidArgumentError,
        NotAttachedError,
        NotFoundError,
        TillageError,
    )


def __getattr__(name: str) -> Any:
    if name in _ERRORS:
        from tillage import errors

        return getattr(errors, name)
    if name in ("call", "contracts"):
        from tillage import api

        return getattr(api, name)
    raise AttributeError(f"module 'tillage' has no attribute {name!r}")
