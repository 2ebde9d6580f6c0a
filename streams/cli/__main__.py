"""``python -m streams.cli``: the same as the ``memstream`` command."""

import sys

from streams.cli.main import main

if __name__ == "__main__":  # not when a module scan imports it
    sys.exit(main())
