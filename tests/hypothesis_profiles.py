"""The project's Hypothesis profiles, and `examples(n)` for the tests that ask for a count.

- `ci`: derandomized (a red run is reproducible, a green one is not luck), no example database
  (derandomize implies it), the failing example's blob printed so it can be replayed anywhere;
- `dev`: each run explores new examples and keeps the failures it finds in `.hypothesis/`;
- `explore`: dev with 20 times the examples, for a long hunt (`HYPOTHESIS_PROFILE=explore`).

None has a per-example deadline: the machine is small and shared, and a slow example is no bug.

A test's own `@settings(max_examples=...)` overrides any profile, so a test that needs a count
asks for it through `examples(n)`, which scales `n` by the active profile (`explore`: 20 times).
Settings are read when the test is decorated, that is when its module is imported: the conftest
loads the profile first (`load_profile(os.environ)`), or pytest's `--hypothesis-profile`.
Under `ci`, `--hypothesis-seed` has no effect (derandomize wins): replay with the printed blob,
or pin the input with `@example`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hypothesis import settings

# Hypothesis' own defaults (100 examples), the parent of every profile: what was loaded
# before (Hypothesis loads its own `ci` under CI) must not leak into ours.
_BASE = settings.get_profile("default")

settings.register_profile(
    "ci", _BASE, derandomize=True, print_blob=True, deadline=None, database=None
)
settings.register_profile("dev", _BASE, derandomize=False, print_blob=True, deadline=None)
settings.register_profile("explore", settings.get_profile("dev"), max_examples=2000)


def profile_name(env: Mapping[str, str]) -> str:
    """The profile to run under: `HYPOTHESIS_PROFILE` if set, else `ci` under CI, else `dev`."""
    chosen = env.get("HYPOTHESIS_PROFILE")
    if chosen:
        return chosen
    return "ci" if env.get("CI") else "dev"


def load_profile(env: Mapping[str, str]) -> str:
    """Loads the profile `env` asks for (see `profile_name`) and returns its name."""
    name = profile_name(env)
    settings.load_profile(name)
    return name


def examples(n: int) -> settings:
    """The active profile with `n` examples scaled by it (its count over Hypothesis' 100), for
    use as a test decorator. If no profile was chosen yet (a module imported without the
    conftest), the environment chooses it: a counted test never runs under Hypothesis' own
    defaults (and their 200 ms deadline)."""
    if settings.get_current_profile_name() == "default":
        load_profile(os.environ)
    active = settings.default
    assert active is not None
    return settings(max_examples=max(1, n * active.max_examples // _BASE.max_examples))
