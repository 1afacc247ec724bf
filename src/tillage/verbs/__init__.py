"""The verb layer: every operation declared once as a contract plus a handler (see registry)."""
