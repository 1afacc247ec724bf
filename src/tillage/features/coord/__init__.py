"""The family's blackboard: small values under keys, shared by a workspace and all its forks."""
