"""The watcher: inotify hints, the quiet-time debounce, and the daemon's life cycle."""
