"""Bisecting a timeline: probing snapshots with a command in throwaway folders."""
