"""The ``memstream`` command line (:mod:`streams.cli.main`) and its subcommands,
one module each. ``streams.cli:main`` is the console script."""

from streams.cli.main import main

__all__ = ["main"]
