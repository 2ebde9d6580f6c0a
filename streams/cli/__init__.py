"""The ``memstream`` command line and its subcommands."""
