"""Public errors of installing agent hooks (shared code invalid_argument, workspace names).

Apart from the feature code so that the verb can name them in its contract without importing
the seal machinery (listing contracts stays cheap).
"""

from __future__ import annotations

from tillage.errors import InvalidArgumentError


class InvalidAgentSettingsError(InvalidArgumentError):
    """The agent's settings file is not valid JSON (or not shaped as its schema says): it is
    left untouched rather than overwritten."""

    name = "hook.invalid_settings"
    module = "workspace"
    next_step = "fix the settings file (it must be a JSON object), then run `till hook install`"


class UnsafeSettingsDirError(InvalidArgumentError):
    """`.claude` (or the settings file in it) is a symlink or not what it should be: writing
    through it could change another project's files."""

    name = "hook.unsafe_settings_path"
    module = "workspace"
    next_step = "replace the symlink with a real folder or file, then run `till hook install`"
