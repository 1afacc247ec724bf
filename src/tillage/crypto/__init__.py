"""The only trust boundary: encryption below the sync transport. Empty until sync lands."""
