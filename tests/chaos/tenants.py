"""The two tenants of the noisy-neighbour run, as upstreams would send their load.

* **calm** — ``calm_users`` users, each in one conversation of short sessions
  (``session_messages`` messages, then a ``session_end``), at ``calm_rate``
  events per second all together; every session still open when the traffic
  stops is ended. The time each ``session_end`` was produced is kept: a
  session's consolidation delay runs from it to its run's ``finished_at``.
* **loud** — a small seed session first (memories to erase), then one session of
  ``loud_messages`` short messages produced as fast as the producer goes, each
  user line a new fact (loud's cube grows by thousands); a memory of loud's
  erased every ``erase_every_s`` through ``memory.erasures`` (the receipt
  awaited, as ``memstream erase`` does); queries at ``flood_rate`` per second,
  above the default quota, their replies left on a topic of their own.

Event times are the wall clock: sessions end by their ``session_end`` (or the
ingest's cut of an over-long session), never by an idle gap.

The knobs (:class:`NeighbourConfig`) come from ``NEIGHBOUR_*`` environment
variables; the defaults are the suite's run (two phases in about four minutes
on two cores). A local run can shrink loud's session
(``NEIGHBOUR_LOUD_MESSAGES=5000``); ``bench/neighbour.py`` turns loud's parts
off one at a time (``--no-session``, ``--no-erase``, ``--no-flood``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from streams.client import MemoryClient, QueryTimeoutError
from streams.wire.query import MAX_TIMEOUT_MS
from streams.wire.spring_reply import request_headers
from tests.chaos import vocabulary as V
from tests.chaos.traffic import _producer
from tests.chaos.workload import Conversation

CALM = "calm"
LOUD = "loud"
AGENT = "concierge"


@dataclass(frozen=True)
class NeighbourConfig:
    seconds: float = 45.0  # calm's traffic (and loud's erasures and flood) lasts this long
    calm_users: int = 20
    session_messages: int = 10  # messages of a calm session, its session_end after them
    calm_rate: float = 10.0  # calm chat events per second, all users together
    query_rate: float = 5.0  # calm queries per second, each with a real deadline
    deadline_s: float = 1.0
    loud_messages: int = 30_000  # loud's one long session; 0: none
    loud_after_s: float = 5.0  # loud begins this long after calm
    erase_every_s: float = 5.0  # loud erases one of its memories this often; 0: never
    flood_rate: float = 150.0  # loud's queries per second (its quota is 100); 0: none
    rss_limit_mb: int = 1024  # the pod's memory limit: the worker is SIGKILLed above it
    stall_s: float = 60.0  # a phase stops waiting after this long without progress
    settle_max_s: float = 240.0  # and after this long at most
    p99_floor_ms: float = 100.0  # see tests/chaos/test_neighbour.py
    delay_floor_s: float = 1.0
    margin: float = 0.20  # the 20 %
    query_process: str = "own"  # query.process of the worker: "own" or "worker"

    @property
    def loud_enabled(self) -> bool:
        return self.loud_messages > 0 or self.erase_every_s > 0 or self.flood_rate > 0

    @staticmethod
    def from_env(env: dict[str, str] | None = None, **overrides: object) -> NeighbourConfig:
        env = dict(os.environ if env is None else env)
        values: dict[str, object] = {}
        for f in fields(NeighbourConfig):
            raw = env.get(f"NEIGHBOUR_{f.name.upper()}")
            if raw is not None:
                values[f.name] = type(getattr(NeighbourConfig(), f.name))(raw)
        values.update(overrides)
        return NeighbourConfig(**values)  # type: ignore[arg-type]

    def without_loud(self) -> NeighbourConfig:
        return NeighbourConfig(**{**self.__dict__, "loud_messages": 0, "erase_every_s": 0.0,
                                  "flood_rate": 0.0})

    def describe(self) -> str:
        return " ".join(f"NEIGHBOUR_{f.name.upper()}={getattr(self, f.name)}"
                        for f in fields(NeighbourConfig))


def chat_doc(c: Conversation, event_id: str, role: str = "", content: str = "") -> bytes:
    """A chat event of ``c`` at the wall clock's now; no ``role``: a session end."""
    doc: dict[str, Any] = {
        "event_id": event_id, "type": "message" if role else "session_end",
        "tenant_id": c.tenant, "user_id": c.user, "agent_id": c.agent, "conversation_id": c.id,
        "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z")}
    if role:
        doc.update(role=role, content=content)
    else:
        doc["reason"] = "user_left"
    return json.dumps(doc, separators=(",", ":")).encode()


def calm_conversations(users: int) -> list[Conversation]:
    return [Conversation(CALM, f"cu{i:02d}", AGENT, f"cc{i:02d}") for i in range(users)]


@dataclass
class CalmChat:
    """Calm's chat: what was sent, and when each session ended (wall clock, naive UTC)."""

    cfg: NeighbourConfig
    topic: str
    sent: list[str] = field(default_factory=list)  # event ids of messages
    ended: dict[str, datetime] = field(default_factory=dict)  # closed_id -> session_end sent

    def _lines(self, c: Conversation, seq: int) -> list[tuple[str, str]]:
        rng = random.Random(f"{c.id}#{seq}")
        slot = rng.choice(V.SLOTS)
        user = [slot.say(rng.choice(slot.values))] + [
            rng.choice(V.SMALL_TALK) for _ in range(self.cfg.session_messages // 2 - 1)]
        out: list[tuple[str, str]] = []
        for line in user:
            out += [("user", line), ("assistant", rng.choice(V.REPLIES))]
        return out[:self.cfg.session_messages]

    def _events(self, c: Conversation) -> Any:
        """The conversation's events: (event id or None for a session end, seq, role, text)."""
        for seq in itertools.count(1):
            for n, (role, text) in enumerate(self._lines(c, seq)):
                yield f"{c.id}-{seq}-{n}", seq, role, text
            yield None, seq, "", ""

    async def run(self, stop: asyncio.Event) -> None:
        convs = calm_conversations(self.cfg.calm_users)
        streams = [self._events(c) for c in convs]
        open_seq: dict[int, int] = {}
        producer = _producer()
        await producer.start()
        try:
            began, n = time.monotonic(), 0
            while not stop.is_set():
                i = n % len(convs)
                await self._send(producer, convs[i], next(streams[i]), open_seq, i)
                n += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(),
                                           max(0.0, began + n / self.cfg.calm_rate
                                               - time.monotonic()))
            for i, seq in sorted(open_seq.items()):  # end every session still open
                await self._send(producer, convs[i], (None, seq, "", ""), open_seq, i)
            await producer.flush()
        finally:
            await producer.stop()

    async def _send(self, producer: Any, c: Conversation, event: tuple[str | None, int, str, str],
                    open_seq: dict[int, int], i: int) -> None:
        event_id, seq, role, text = event
        if event_id is None:
            await producer.send_and_wait(self.topic, chat_doc(c, f"{c.id}-{seq}-end"),
                                         key=c.id.encode())
            self.ended[f"{c.tenant}/{c.id}#{seq}"] = datetime.now(UTC).replace(tzinfo=None)
            open_seq.pop(i, None)
        else:
            await producer.send_and_wait(self.topic, chat_doc(c, event_id, role, text),
                                         key=c.id.encode())
            self.sent.append(event_id)
            open_seq[i] = seq


async def loud_session(cfg: NeighbourConfig, topic: str, note: Callable[[str], None]) -> int:
    """Loud's seed session, then its long one (if any), as fast as they go; the
    messages sent."""
    seed = Conversation(LOUD, "lu-seed", AGENT, "lc-seed")
    long = Conversation(LOUD, "lu-long", AGENT, "lc-long")
    producer = _producer()
    await producer.start()
    sent = 0
    try:
        for n, slot in enumerate(V.SLOTS):
            await producer.send(topic, chat_doc(seed, f"seed-{n}", "user", slot.say(
                slot.values[n % len(slot.values)])), key=seed.id.encode())
            sent += 1
        await producer.send(topic, chat_doc(seed, "seed-end"), key=seed.id.encode())
        began = time.monotonic()
        for n in range(cfg.loud_messages):
            if n % 2 == 0:
                text = (f"Please remember that locker {n} holds my "
                        f"{V.SLOTS[3].values[n % 10]} bag number {n * 7 + 3}.")
                await producer.send(topic, chat_doc(long, f"long-{n}", "user", text),
                                    key=long.id.encode())
            else:
                await producer.send(topic, chat_doc(long, f"long-{n}", "assistant",
                                                    V.REPLIES[n % len(V.REPLIES)]),
                                    key=long.id.encode())
            sent += 1
        if cfg.loud_messages:
            await producer.send(topic, chat_doc(long, "long-end"), key=long.id.encode())
        await producer.flush()
        note(f"loud: {sent} messages sent in {time.monotonic() - began:.1f}s")
    finally:
        await producer.stop()
    return sent


@dataclass
class Erasures:
    """Loud's erasures, one memory at a time, each receipt awaited in its own task."""

    receipts: dict[str, int] = field(default_factory=dict)  # status (or error) -> count
    asked: int = 0
    pending: set[asyncio.Task[None]] = field(default_factory=set)

    async def run(self, cfg: NeighbourConfig, client: MemoryClient,
                  pick: Callable[[set[str]], Awaitable[str | None]], stop: asyncio.Event) -> None:
        erased: set[str] = set()
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), cfg.erase_every_s)
            if stop.is_set():
                break
            memory_id = await pick(erased)
            if memory_id is None:
                continue
            erased.add(memory_id)
            self.asked += 1
            task = asyncio.create_task(self._erase(client, memory_id))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)

    async def _erase(self, client: MemoryClient, memory_id: str) -> None:
        try:
            r = await client.erase(tenant_id=LOUD, target="memory", memory_id=memory_id,
                                   provider="MYSQL", timeout_s=300.0)
            key = r.status if r.error is None else f"{r.status}:{r.error.code}"
        except QueryTimeoutError:
            key = "no receipt"
        self.receipts[key] = self.receipts.get(key, 0) + 1

    async def wait(self, timeout_s: float) -> None:
        if self.pending:
            await asyncio.wait(set(self.pending), timeout=timeout_s)


async def flood(cfg: NeighbourConfig, topic: str, reply_topic: str, stop: asyncio.Event) -> int:
    """Loud's queries at ``flood_rate`` until ``stop``; how many were sent."""
    producer = _producer()
    await producer.start()
    began, n = time.monotonic(), 0
    try:
        while not stop.is_set():
            doc = {"request_id": f"flood{n}", "tenant_id": LOUD, "user_id": "lu-long",
                   "agent_id": AGENT, "conversation_id": "lc-long",
                   "message": V.QUESTIONS[n % len(V.QUESTIONS)],
                   "options": {"timeout_ms": MAX_TIMEOUT_MS, "top_k": 5}}
            await producer.send(topic, json.dumps(doc).encode(), key=b"loud/lu-long",
                                headers=request_headers(reply_topic, f"flood{n}".encode()))
            n += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(),
                                       max(0.0, began + n / cfg.flood_rate - time.monotonic()))
        await producer.flush()
    finally:
        await producer.stop()
    return n
