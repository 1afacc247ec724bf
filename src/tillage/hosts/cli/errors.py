"""The command-line host's own public errors."""

from __future__ import annotations

from tillage.errors import TillageError


class UsageError(TillageError):
    """An unknown flag, a missing argument or an unknown command: exit status 2."""

    code = -32070
    name = "usage"
    module = "host"
    next_step = "see `till --help` or `till COMMAND --help`"
