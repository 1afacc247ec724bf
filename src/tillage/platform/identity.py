"""Which tillage is running: its version and where its code lives.

A watcher keeps running across an upgrade; a call from the new install must not be answered by
the old code, so the socket door and `till watch` compare this before trusting a watcher.
"""

from __future__ import annotations

import os
import sys


def code_identity() -> str:
    """`VERSION@PACKAGE_FOLDER` of the tillage this process runs."""
    # The package is imported before any of its modules; read it from there rather than
    # importing it here, which would make this low layer depend on the library door.
    package = sys.modules["tillage"]
    folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return f"{getattr(package, '__version__', '?')}@{folder}"
