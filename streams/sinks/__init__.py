"""Batching sinks: add / flush / write(batch); offsets are committed only after a batch is
stored.
"""
