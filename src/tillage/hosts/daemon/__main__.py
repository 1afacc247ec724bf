"""`python -m tillage.hosts.daemon`: the watcher daemon of one workspace."""

from __future__ import annotations

import sys

from tillage.hosts.daemon.main import main

sys.exit(main())
