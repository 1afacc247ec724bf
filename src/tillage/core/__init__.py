"""Pure logic: IDs, models, the canonical codec, paths, tree diff.

No I/O, no clock, no environment: everything here takes values and returns values.
"""
