"""The workspace feature: attaching a folder, sealing it, its timeline, and rewinding it."""
