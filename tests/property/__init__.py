"""Property-based tests of the pure core.

Their Hypothesis settings are the project's profiles (tests/hypothesis_profiles): no deadline,
derandomized under CI; a test asks for the count it needs through `examples(n)`.
"""
