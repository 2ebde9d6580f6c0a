"""The worker's logging (Faust's terminal spinner must not lower the root level) and
which topics the commit guard's recovery takes as finished out of order."""

from __future__ import annotations

import logging

from faust.utils.terminal import Spinner

from streams.settings import Settings
from streams.worker.commit_guard import CommitGuard
from streams.worker.faust_glue import QuietWorker, _Recovery, out_of_order_topics


def test_the_root_logger_keeps_its_level_at_warn_and_above() -> None:
    root = logging.Logger("root-under-test", logging.WARNING)
    root.addHandler(logging.StreamHandler())
    worker = object.__new__(QuietWorker)
    worker.spinner = Spinner()
    worker.on_setup_root_logger(root, logging.WARNING)
    assert root.level == logging.WARNING and not root.isEnabledFor(logging.DEBUG)
    assert len(root.handlers) == 1 and worker.spinner is None


def test_consolidation_finishing_out_of_order_is_not_taken_for_a_record_passed_over() -> None:
    """Session ends are acknowledged as each is handled, a short one before a long
    one read earlier: the long one runs, it was not passed over (no rebalance)."""
    kafka = Settings().kafka
    guard = CommitGuard()
    recovery = _Recovery(guard, frozenset(out_of_order_topics(kafka)), after_s=60.0)
    for topic in (kafka.session_closed_topic, kafka.retry_topic, kafka.chat_topic):
        guard.received((topic, 0), [0, 1])
        guard.finished((topic, 0), 1)
    recovery.check(consumer=None)
    # only the in-order topic's record counts as passed over
    assert set(recovery.since) == {(kafka.chat_topic, 0)}
