"""`python -m tillage` runs the `till` command, through the same doors as the console script."""

from tillage.hosts.cli.fast import main

raise SystemExit(main())
