"""Universes: making, copying, listing, running in and removing forks."""
