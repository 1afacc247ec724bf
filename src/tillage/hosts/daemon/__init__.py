"""The watcher daemon: one process per workspace that seals quiet moments and serves the verb
registry (and the command line's fast path) over a local JSON-RPC socket."""
