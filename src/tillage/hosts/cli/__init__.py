"""The `till` command-line host."""
