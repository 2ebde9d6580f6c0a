"""The files of the checkout, walked while other tests add and remove theirs."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from pathlib import Path


def files_under(root: Path, skip_dirs: Collection[str] = ()) -> Iterator[Path]:
    """Every file under ``root``, in no set order, not descending into a folder named in
    ``skip_dirs``. A folder removed while it is walked (a test's database or topic
    dropped in a parallel run) is passed over, where ``Path.rglob`` raises."""
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip_dirs]
        for name in names:
            yield Path(top, name)
