"""The worker's logging: Faust's terminal spinner must not lower the root level."""

from __future__ import annotations

import logging

from faust.utils.terminal import Spinner

from streams.worker.faust_glue import QuietWorker


def test_the_root_logger_keeps_its_level_at_warn_and_above() -> None:
    root = logging.Logger("root-under-test", logging.WARNING)
    root.addHandler(logging.StreamHandler())
    worker = object.__new__(QuietWorker)
    worker.spinner = Spinner()
    worker.on_setup_root_logger(root, logging.WARNING)
    assert root.level == logging.WARNING and not root.isEnabledFor(logging.DEBUG)
    assert len(root.handlers) == 1 and worker.spinner is None
