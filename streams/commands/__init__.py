"""Subcommands of the `memstream` command line."""
