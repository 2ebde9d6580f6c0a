"""The idle scan's cost per tick on the event loop, as the sessions table grows.

``python bench/idle_scan.py [states] [due]``: a sessions table of ``states``
conversation states (as the ingest agent writes them), ``due`` of them idle.
Prints the milliseconds of one tick that reads the whole table (the first tick,
and the first after a rebalance) and of a steady tick, which reads only the
states due (and how many states each visited), and, for the worker's way of
reading the whole table (in parts, the event loop free between them), the whole
tick and the longest part the event loop is held for. No service is needed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from streams.session.idle import IdleScanner
from streams.session.model import SessionState

NOW = 1_000_000.0


def table(states: int, due: int) -> dict[str, dict[str, Any]]:
    out = {}
    for i in range(states):
        s = SessionState(tenant_id="t1", user_id=f"u{i % 500}", agent_id="a1",
                         conversation_id=f"c{i}", message_count=12, session_message_count=4,
                         last_seen_at=NOW - (3600 if i < due else 5), open=True,
                         offsets={"memory.chat-messages": i, "memory.session-idle": 3},
                         last_event_id=f"e{i}", bounds={"memory.chat-messages": [[i, 1]]})
        out[f"t1/c{i}"] = s.to_table()
    return out


def ms(call: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = call()
    return (time.perf_counter() - started) * 1000, out


def main() -> None:
    states = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    due = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    data = table(states, due)

    scanner = IdleScanner(timeout_s=1800, resend_after_s=300, clock=lambda: NOW)
    incremental = hasattr(scanner, "tick")

    def items() -> list[tuple[str, dict[str, Any]]]:
        if not incremental:  # the table as the worker gave a full scan: each value copied
            return [(k, dict(v)) for k, v in data.items()]
        return list(data.items())  # the values themselves, read only

    whole, checks = ms(lambda: scanner.scan(items()))
    print(f"{states:,} states, {due:,} idle: a tick reading the table whole "
          f"{whole:.0f} ms, {len(checks)} checks")
    if incremental:
        scanner.rescan()
        steady = []
        for t in range(1, 6):  # one minute apart, as the timer runs
            scanner.clock = lambda t=t: NOW + 60 * t  # type: ignore[misc]
            took, _ = ms(lambda: scanner.tick(items))
            steady.append((took, scanner.visited))
        print("steady ticks (ms, states visited): "
              + ", ".join(f"{took:.2f} ({visited:,})" for took, visited in steady))
        parts: list[float] = []
        mark = time.perf_counter()

        async def pause() -> None:
            nonlocal mark
            parts.append((time.perf_counter() - mark) * 1000)
            await asyncio.sleep(0)
            mark = time.perf_counter()

        async def in_parts() -> float:
            nonlocal mark
            scanner.rescan()
            started = mark = time.perf_counter()
            await scanner.tick_in_parts(lambda: list(data), data.get, pause=pause)
            parts.append((time.perf_counter() - mark) * 1000)
            return (time.perf_counter() - started) * 1000

        whole_in_parts = asyncio.run(in_parts())
        print(f"read in parts (the worker's tick after a rebalance): {whole_in_parts:.0f} ms "
              f"in all, {len(parts)} parts: the first (the keys taken) {parts[0]:.1f} ms, the "
              f"median {sorted(parts)[len(parts) // 2]:.1f} ms, the longest {max(parts):.1f} ms")


if __name__ == "__main__":
    main()
