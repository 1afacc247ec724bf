"""The engine: a folder attached, sealed into its timeline, rewound, and changed crash-safely.

Features (tillage.features), the watcher and the verbs build on it through the modules in
`__all__`, its interface; the rest are its own (sqlite_image, journal.applier), and a test
(tests/unit/test_structure.py) keeps every import from outside to the interface and to public
names. Inside, the modules are layered (import-linter, pyproject.toml): recovery above rewind
and materialize, above the journal, above seal, above capture, above trees, above locks,
above attach.
"""

__all__ = [
    "attach",  # finding a workspace (a pure lookup), attaching, the pointer
    "capture",  # the stat walk: what is captured, how change is detected
    "content",  # a file's bytes into the store (chunks, holes, appends)
    "errors",
    "family",  # a workspace's forks and their root
    "journal",  # landing a change crash-safely, finishing an interrupted one
    "locks",  # the workspace lock, the store's shared maintenance lock
    "materialize",  # a snapshot written into a fresh folder, or made in one in place
    "nested",  # a workspace inside another: where the outer's seals stop
    "pathindex",  # the stat facts a delta seal trusts
    "policy",  # `.tillagepolicy`
    "recovery",  # open_workspace: find, then finish what a crash left
    "rewind",  # the rewind verb's logic
    "scratch",  # disposable folders beside a workspace, swept when their process died
    "seal",  # a snapshot of the folder, durable before it is published
    "thinned",  # paths whose bytes a gc dropped
    "timeline",  # snapshot IDs and prefixes
    "trees",  # trees read back as manifests and bytes, the tree cache
    "watchstate",  # asking the workspace's watcher what changed
]
