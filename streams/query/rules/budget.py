"""From ranked long-term memories to the text blocks that reach the model.

:func:`filter_and_trim` drops weak results (score < 0.3), cuts each memory to
1,000 characters and sorts by score. :func:`pack_budget` then fills a token
budget (default 4,000): the ``user_profile`` cube takes at most 60 % of it
and the agent cube the rest while both have enough to fill their shares; a
cube that cannot fill its share leaves the rest to the other. Memories
are chosen best score first; one that does not fit is skipped (a smaller one
may still fit), so each block is cut at whole lines, never inside a memory.

Presentation, per block: facts first, one line each as ``[YYYY-MM-DD] text``;
then episodic memories (``kind == "episode"``) grouped by session in date
order, a ``[YYYY-MM-DD]`` header per session followed by its chosen turns in
conversation order. Dating a session once instead of every line fits about a
quarter more memories into the same budget, and every line still has a date.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from functools import lru_cache

from streams.clock import aware_utc
from streams.memory.model import USER_CUBE, StoredMemory, by_score
from streams.tokens import CountTokens

NEWLINE_TOKENS = 1
LEFT_OUT_LOOKED_AT = 5


@dataclass(frozen=True)
class Packed:
    user_profile: str
    agent_memory: str
    tokens_used: int
    included: list[StoredMemory] = field(default_factory=list)


def filter_and_trim(
    memories: Sequence[StoredMemory], *, min_score: float = 0.3, max_chars: int = 1000
) -> list[StoredMemory]:
    """Memories scoring at least ``min_score``, each cut to ``max_chars``, best first."""
    kept = [
        m if len(m.content) <= max_chars else replace(m, content=m.content[:max_chars])
        for m in memories
        if m.score >= min_score
    ]
    return sorted(kept, key=by_score, reverse=True)


def _date(ts: datetime | None) -> str:
    return _day(ts.date()) if ts else "undated"


@lru_cache(maxsize=4096)
def _day(day: date) -> str:
    """Memoised by the day: most memories' times are seen once, their days often."""
    return day.strftime("%Y-%m-%d")


def _one_line(text: str) -> str:
    """``text`` with each run of whitespace one space, none at either end. Most memories
    are so already: printable (every whitespace but the space is not), no double space,
    none at the ends; those are given back as they are, without splitting them."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def memory_line(kind: str, content: str, event_time: datetime | None) -> str:
    """The text a memory costs in a block, its newline included: ``[YYYY-MM-DD] text``
    for a fact, the text alone for an episode (its session's header carries the date);
    the text on one line. A memory of a longer ``content`` than the query's
    ``max_memory_chars`` costs the line of its cut content (:func:`filter_and_trim`)."""
    text = _one_line(content)
    return f"{text}\n" if kind == "episode" else f"[{_date(event_time)}] {text}\n"


def _session_key(m: StoredMemory) -> str:
    s = m.metadata.get("session")
    return f"s:{s}" if s is not None else f"d:{_date(m.event_time)}"


def _seq(m: StoredMemory) -> int:
    s = m.metadata.get("seq")
    return s if isinstance(s, int) else 0


_NO_TIME = datetime.min.replace(tzinfo=UTC)


def _time(m: StoredMemory) -> datetime:
    """The memory's event time, aware (a provider may give naive UTC); the earliest when
    it has none."""
    return aware_utc(m.event_time) if m.event_time is not None else _NO_TIME


def _first_time(ms: Sequence[StoredMemory]) -> datetime | None:
    times = [_time(m) for m in ms if m.event_time is not None]
    return min(times) if times else None


def _pack_block(
    memories: Sequence[StoredMemory], limit: int, count: CountTokens
) -> tuple[list[str], list[StoredMemory], int]:
    """Choose by score within ``limit`` tokens; render facts, then dated session blocks.
    A line costs its tokens with its newline, and the block's count is the sum of its
    lines' costs with the last one counted without its newline: exact for tiktoken's
    encodings when no line starts or ends with whitespace (their pre-tokenizer never
    joins the text of one line with the next: a newline ends a piece or is one, and BPE
    merges only within a piece), so the counts taken while choosing make the total."""
    used = 0
    facts: list[tuple[StoredMemory, str, int]] = []  # the memory, its line, its cost
    sessions: dict[str, list[tuple[StoredMemory, str, int]]] = {}
    shown: set[str] = set()  # source events of the chosen episodes, shown verbatim
    for m in memories:
        if limit - used <= NEWLINE_TOKENS:
            break
        if m.kind != "episode" and m.source_event_ids and shown.issuperset(m.source_event_ids):
            continue  # a fact restating turns already in the block adds only tokens
        line = memory_line(m.kind, m.content, m.event_time)
        cost = count(line)
        if m.kind == "episode":
            key = _session_key(m)
            dated = count(f"[{_date(m.event_time)}]\n") if key not in sessions else 0
            if used + cost + dated > limit:
                continue
            sessions.setdefault(key, []).append((m, line[:-1], cost))
            shown.update(m.source_event_ids)
            cost += dated
        else:
            if used + cost > limit:
                continue
            facts.append((m, line[:-1], cost))
        used += cost
    lines = [line for _, line, _ in facts]
    costs = [cost for _, _, cost in facts]
    blocks = [(_first_time([m for m, _, _ in b]), b) for b in sessions.values()]
    blocks.sort(key=lambda fb: (fb[0] or _NO_TIME, _session_key(fb[1][0][0])))
    for first, block in blocks:
        header = f"[{_date(first)}]"
        lines.append(header)
        costs.append(count(header + "\n"))
        for _, text, cost in sorted(block, key=lambda t: (_seq(t[0]), _time(t[0]))):
            lines.append(text)
            costs.append(cost)
    tokens = sum(costs[:-1]) + count(lines[-1]) if lines else 0
    chosen = {id(m) for m, _, _ in facts} | {id(m) for b in sessions.values() for m, _, _ in b}
    return lines, [m for m in memories if id(m) in chosen], tokens


def _short_of_room(memories: Sequence[StoredMemory], chosen: Sequence[StoredMemory],
                   share: int, count: CountTokens) -> bool:
    """Whether a cube had more than its share could hold: among the best of the memories
    left out (``LEFT_OUT_LOOKED_AT``), one that would fit the share alone. A cube whose
    every memory fits, or whose left-out memories are each larger than the whole share,
    cannot fill it."""
    taken = {id(m) for m in chosen}
    left = [m for m in memories if id(m) not in taken][:LEFT_OUT_LOOKED_AT]
    return any(count(memory_line(m.kind, m.content, m.event_time)) <= share for m in left)


def pack_budget(
    memories: Sequence[StoredMemory],
    *,
    budget_tokens: int = 4000,
    user_share: float = 0.6,
    count: CountTokens,
) -> Packed:
    """Fill ``budget_tokens`` with both cubes: ``user_profile`` takes at most
    ``user_share`` of it and the agent cube the rest, as long as both have enough to
    fill their shares; a cube that cannot fill its share leaves what it does not use
    to the other (in both directions).

    The agent cube is chosen once within its own share first: when it is not short of
    room (all of it fits, or what is left out is each too large for the whole share),
    ``user_profile`` may take everything but what it used, else its own share; the
    agent cube is then chosen again within what ``user_profile`` left.
    ``memories`` may be in any order; selection is by score. ``count`` is the
    token counter of the model the text is for.
    """
    ranked = sorted(memories, key=by_score, reverse=True)
    user = [m for m in ranked if m.cube == USER_CUBE]
    agent = [m for m in ranked if m.cube != USER_CUBE]
    user_limit = int(budget_tokens * user_share)
    agent_share = budget_tokens - user_limit
    _, agent_fit, agent_need = _pack_block(agent, agent_share, count)
    if not _short_of_room(agent, agent_fit, agent_share, count):
        user_limit = budget_tokens - agent_need  # the agent cube cannot fill its share
    user_lines, user_in, user_tokens = _pack_block(user, user_limit, count)
    agent_lines, agent_in, agent_tokens = _pack_block(agent, budget_tokens - user_tokens, count)
    included = sorted(user_in + agent_in, key=by_score, reverse=True)
    return Packed("\n".join(user_lines), "\n".join(agent_lines), user_tokens + agent_tokens,
                  included)
