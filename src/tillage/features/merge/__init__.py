"""Merging a fork back three-way and landing the result."""
