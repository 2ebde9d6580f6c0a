"""In-memory implementations of the stages' ports, typed, one module per stage:
what ``tests/`` and ``bench/`` run the processors with when no real store is wanted.

Each double keeps what was done to it in plain attributes for a test to read,
and raises the port's own errors (``streams.stores``) when told to fail.
"""
