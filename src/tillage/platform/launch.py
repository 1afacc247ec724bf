"""How a host starts a user's command: the environment it inherits and where its output goes.

A host that runs a command line for someone else (the watcher's socket, a test, the MCP
server) is not that caller, so neither may come from this process's own environment or
descriptors: the host says, once, in a Launch. Light on purpose (`os` alone): the command
line builds one on every call, before it knows whether a command will run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import BinaryIO

# What a user's command never inherits: the key that opens a remote, the file holding it, the
# descriptor it was handed over on (platform/keyhandoff.py), and any later variable so named.
# The command may be anything an agent wrote, and whatever it prints lands in results and logs.
SECRET_PREFIX = "TILLAGE_RECOVERY_KEY"
SECRET_VARIABLES = frozenset(
    {"TILLAGE_RECOVERY_KEY", "TILLAGE_RECOVERY_KEY_FILE", "TILLAGE_RECOVERY_KEY_FD"}
)


@dataclass(frozen=True)
class Launch:
    """The environment a command inherits (None: this process's) and where its output is
    copied live (None: captured only)."""

    env: Mapping[str, str] | None = None
    output: BinaryIO | None = None


def is_secret(name: str) -> bool:
    """Whether an environment variable names the recovery key (and so is never passed on)."""
    return name.startswith(SECRET_PREFIX)


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """`env` less every variable that names the recovery key: the one filter for the
    environment of everything tillage starts (user commands, ssh, the watcher)."""
    return {k: v for k, v in env.items() if not is_secret(k)}


def inherited_env(launch: Launch | None) -> dict[str, str]:
    """The environment a user's command starts from: the host's, less the secrets."""
    return without_secrets(os.environ if launch is None or launch.env is None else launch.env)
