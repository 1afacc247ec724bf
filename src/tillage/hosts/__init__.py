"""Doors onto the verb registry.

Each derives its surface from the contracts; no host imports another.
"""
