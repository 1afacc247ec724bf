"""File-system primitives, locks, failpoints and the clock: the one place durable patterns live."""
