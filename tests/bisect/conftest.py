"""Fixtures shared by the universe tests (tests/universe.py)."""

from tests.universe import project, xfs_loop

__all__ = ["project", "xfs_loop"]
