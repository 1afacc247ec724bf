"""Per-session changelogs: commits, diffs and reverts of an agent session."""
