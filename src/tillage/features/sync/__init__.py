"""Sync: a workspace's remotes, push, pull, follow and work across machines."""
