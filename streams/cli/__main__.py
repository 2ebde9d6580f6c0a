"""``python -m streams.cli``: the same as the ``memstream`` command."""

import sys

from streams.cli.main import main

sys.exit(main())
