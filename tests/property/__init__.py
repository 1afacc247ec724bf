"""Property-based tests of the pure core, with one shared hypothesis profile.

The profile turns off the per-example deadline (the machine is small and shared) and keeps the
example counts modest; a test asks for the count it needs through `examples(n)`. Under CI the
examples are derandomized, so a red run is reproducible and a green one is not luck; locally
each run explores new examples.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "tillage-property",
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
    database=None if os.environ.get("CI") else settings.default.database,
)
PROFILE = settings.get_profile("tillage-property")


def examples(n: int) -> settings:
    """Returns the shared profile with `n` examples, for use as a test decorator."""
    return settings(PROFILE, max_examples=n)
