"""Faust's wait for the records handed to agents, without a full garbage collection
on every turn.

Before a rebalance goes on, and when the worker stops, Faust waits until every
record it handed to an agent is acknowledged (``Consumer.wait_empty`` in
``faust/transport/consumer.py``). Its loop runs ``gc.collect()`` on every turn —
after each acknowledgement, and at least once a second — and on every tenth turn
writes every agent's stack to the log. A full collection walks the worker's whole
heap while nothing else runs (:mod:`.gc_tuning`), and this worker answers queries
on the same event loop: a rebalance waiting for a few dozen session ends being
consolidated held that loop for seconds, and the queries asked meanwhile missed
their callers' deadlines.

:func:`install_wait_empty` puts in a loop that waits and commits as Faust's does
(a commit on every turn, then up to a second for the next acknowledgement, and a
last commit once nothing is pending or the consumer stops), and logs what it still
waits for, with the agents' stacks, at most every ``report_every_s``. It collects
garbage only when nothing was acknowledged for ``collect_after_s``: the records
pending are held weakly (``_unacked_messages`` is a ``WeakSet``), and one an agent
dropped unacknowledged inside a reference cycle (a crashed agent's frame) leaves it
only when a collection frees it.

Before each turn it calls the hooks registered with :func:`let_go_while_waiting`:
an agent with records read ahead lets go of those whose work has not begun, and
of any it reads until the wait ends (:meth:`.in_flight.InFlight.release`, then
``resume``), so that a rebalance waits only for the runs under way, not for every
session end read ahead.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from faust.transport.consumer import CONSUMER_WAIT_EMPTY, Consumer
from mode import Service

log = logging.getLogger(__name__)

REPORT_EVERY_S = 30.0
ACK_WAIT_S = 1.0  # Faust's own: one turn at least every second
COLLECT_AFTER_S = 10.0  # without an acknowledgement this long, collect once
SHOWN = 10  # pending records named in the log

WaitEmpty = Callable[[Any], Awaitable[None]]
FAUST_WAIT_EMPTY: WaitEmpty = Consumer.wait_empty
"""Faust's own loop, as this module found it."""

LetGo = Callable[[], Awaitable[object]]
Resume = Callable[[], None]

_HOOKS: list[tuple[LetGo, Resume]] = []


@contextlib.contextmanager
def let_go_while_waiting(let_go: LetGo, resume: Resume) -> Iterator[None]:
    """Within the block, ``let_go`` is awaited before each turn of the wait, and
    ``resume`` called once the wait ends (both must return promptly; what they
    raise is logged)."""
    hooks = (let_go, resume)
    _HOOKS.append(hooks)
    try:
        yield
    finally:
        _HOOKS.remove(hooks)


async def _let_go() -> None:
    for let_go, _ in list(_HOOKS):
        try:
            await let_go()
        except Exception:  # the wait goes on: it only waits longer
            log.exception("letting go of records not begun failed")


def _resume() -> None:
    for _, resume in list(_HOOKS):
        try:
            resume()
        except Exception:
            log.exception("resuming after letting go failed")


def wait_empty_loop(report_every_s: float = REPORT_EVERY_S,
                    clock: Callable[[], float] = time.monotonic,
                    collect_after_s: float = COLLECT_AFTER_S) -> WaitEmpty:
    """``Consumer.wait_empty`` without a garbage collection on every turn (see the
    module docstring); ``self`` is Faust's consumer."""

    async def wait_empty(self: Any) -> None:
        try:
            await _wait(self)
        finally:
            _resume()

    async def _wait(self: Any) -> None:
        reported = progressed = clock()
        pending = len(self._unacked_messages)
        while not self.should_stop and self._unacked_messages:
            await _let_go()
            self._clean_unacked_messages()
            if not self._unacked_messages:
                break
            now = clock()
            if len(self._unacked_messages) != pending:
                pending, progressed = len(self._unacked_messages), now
            elif now - progressed >= collect_after_s:
                progressed = now
                gc.collect()  # frees what was dropped unacknowledged in a cycle
                continue
            if now - reported >= report_every_s:
                reported = now
                _report(self)
            await self.commit()
            if not self._unacked_messages:
                break
            await self._wait_for_ack(timeout=ACK_WAIT_S)
            self._clean_unacked_messages()
        await self.commit_and_end_transactions()

    return wait_empty


def _report(consumer: Any) -> None:
    waiting = list(consumer._unacked_messages)
    named = ", ".join(f"{getattr(m, 'topic', '?')}-{getattr(m, 'partition', '?')}"
                      f"@{getattr(m, 'offset', '?')}" for m in waiting[:SHOWN])
    log.warning("still waiting for %d records handed to agents to be acknowledged: %s%s",
                len(waiting), named, ", ..." if len(waiting) > SHOWN else "")
    log.info("agent stacks:\n%s", consumer.app.agents.human_tracebacks())


def install_wait_empty(report_every_s: float = REPORT_EVERY_S) -> None:
    """Replace Faust's ``Consumer.wait_empty`` (idempotent), keeping its transition
    flag (``CONSUMER_WAIT_EMPTY``)."""
    loop = Service.transitions_to(CONSUMER_WAIT_EMPTY)(wait_empty_loop(report_every_s))
    setattr(Consumer, "wait_empty", loop)  # noqa: B010
