"""Agent-turn hooks: sealing when a harness says a turn ended, installing its settings."""
