"""`.tillagepolicy`: gitignore-syntax patterns for subtrees tillage must not capture or touch.

The policy file itself is captured. `.tillage/` at the root is always excluded, and so are the
temporary files tillage itself writes during a rewind.
"""

from __future__ import annotations

from pathlib import Path

POLICY_FILE = ".tillagepolicy"
TEMP_MARK = ".tillage-tmp-"


class Policy:
    """Answers whether a workspace path is excluded from capture (and so from rewind)."""

    def __init__(self, lines: list[str]) -> None:
        self._spec = None
        if any(line.strip() and not line.lstrip().startswith("#") for line in lines):
            import pathspec

            self._spec = pathspec.GitIgnoreSpec.from_lines(lines)

    @classmethod
    def load(cls, root: Path) -> Policy:
        try:
            text = (root / POLICY_FILE).read_text(encoding="utf-8", errors="surrogateescape")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return cls([])
        return cls(text.splitlines())

    def excludes(self, path: str, is_dir: bool) -> bool:
        """Tells whether `path` (workspace-relative) is excluded."""
        if TEMP_MARK in path.rsplit("/", 1)[-1]:
            return True
        if self._spec is None:
            return False
        return bool(self._spec.match_file(path + "/" if is_dir else path))
