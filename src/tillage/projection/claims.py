"""Claims on durable entries, so two runs never both write one: the one that holds an entry's
claim reads, compares and writes it; the other is told `contested` and writes nothing.

A claim belongs to an operation (one flush, one put), not to a projection: a projection
shared by overlapping requests would otherwise grant each of them a key one of them holds, and
they would commit over each other. It is held for that operation only, so no missed release
can leave an entry claimed forever. In-process, as the baseline is.
"""

from __future__ import annotations

import threading


class ClaimRegistry:
    """Which operation holds each entry's claim (keys from `claim_key`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: dict[str, object] = {}

    def try_claim(self, key: str, holder: object) -> bool:
        """Takes `key` for `holder`; False when another holder has it (taking it again for the
        same holder is fine)."""
        with self._lock:
            current = self._holders.setdefault(key, holder)
            return current is holder

    # The same as try_claim, under the name a reader looks for first.
    claim = try_claim

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._holders

    def release(self, key: str, holder: object) -> None:
        """Gives `key` back, if `holder` holds it (never another holder's claim)."""
        with self._lock:
            if self._holders.get(key) is holder:
                del self._holders[key]

    def holder(self, key: str) -> object | None:
        """Who holds `key` now, or None."""
        with self._lock:
            return self._holders.get(key)

    def held(self) -> list[str]:
        """Every key held now (for tests and diagnostics)."""
        with self._lock:
            return sorted(self._holders)


# The process-wide registry projections share when given none: two projections nobody wired
# together still arbitrate.
shared_claims = ClaimRegistry()
