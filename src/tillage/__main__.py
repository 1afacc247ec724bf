"""`python -m tillage` runs the `till` command."""

from tillage.hosts.cli.main import main

raise SystemExit(main())
