"""Features built on the engine (tillage.workspace): each folder is one capability,
and features do not import each other except where the import-linter contract names why."""
