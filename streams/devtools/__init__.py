"""Tools for development and evaluation: the embedded broker, a local worker
process, the LoCoMo harness.
"""
