"""Seeing two universes touch the same path: the radar, claims, and `try`."""
