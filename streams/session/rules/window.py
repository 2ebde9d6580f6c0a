"""The model-ready Session window: alternation rules and the token window.

Input is a conversation's messages oldest first. System and tool messages are
kept apart from the chat turns; turns that break user/assistant alternation
and a leading assistant turn are dropped; then the token window
applies: everything when it fits ``max_tokens``, otherwise the newest turns
that fit ``max_tokens - summary_budget`` with the summary first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from streams.session.model import MessageDoc
from streams.tokens import CountTokens

# OpenAI's chat format spends about this many tokens around every message.
MESSAGE_OVERHEAD_TOKENS = 4


@dataclass(frozen=True)
class SplitMessages:
    chat: list[MessageDoc]
    system: list[MessageDoc]
    tool: list[MessageDoc]


@dataclass
class Window:
    messages: list[MessageDoc]
    system: list[MessageDoc] = field(default_factory=list)
    tool: list[MessageDoc] = field(default_factory=list)
    tokens: int = 0
    truncated: bool = False
    summary_used: bool = False
    dropped_by_alternation: int = 0


def split_roles(messages: Sequence[MessageDoc]) -> SplitMessages:
    chat, system, tool = [], [], []
    for m in messages:
        role = m.get("role")
        if role == "system":
            system.append(m)
        elif role == "tool" or (
            role == "assistant" and m.get("tool_calls") and not m.get("content")
        ):
            tool.append(m)
        else:
            chat.append(m)
    return SplitMessages(chat, system, tool)


def newest_alternating_run(chat: Sequence[MessageDoc]) -> list[MessageDoc]:
    """Strict user/assistant alternation, newest turns first in priority.

    Walking from the newest turn back, a turn with the same role as the newer
    turn kept just before it breaks the alternation and is dropped (so of two
    user messages in a row the later one stays); finally a leading assistant
    turn is dropped so the window starts with the user.
    """
    kept: list[MessageDoc] = []
    for m in reversed(chat):
        if kept and kept[-1]["role"] == m["role"]:
            continue
        kept.append(m)
    kept.reverse()
    if kept and kept[0]["role"] == "assistant":
        kept = kept[1:]
    return kept


def message_tokens(m: MessageDoc, count: CountTokens) -> int:
    return count(str(m.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS


def fit_tokens(
    chat: Sequence[MessageDoc],
    summary: str | None,
    max_tokens: int,
    summary_budget: int,
    count: CountTokens,
) -> Window:
    costs = [message_tokens(m, count) for m in chat]
    total = sum(costs)
    if total <= max_tokens:
        return Window(messages=list(chat), tokens=total)
    budget = max(0, max_tokens - summary_budget) if summary else max_tokens
    kept_rev: list[MessageDoc] = []
    used = 0
    for m, cost in zip(reversed(chat), reversed(costs), strict=True):
        if used + cost > budget:
            break
        kept_rev.append(m)
        used += cost
    kept = list(reversed(kept_rev))
    if summary:
        text = truncate_to_tokens(summary, summary_budget - MESSAGE_OVERHEAD_TOKENS, count)
        head: MessageDoc = {
            "role": "system", "content": f"Conversation summary:\n{text}", "kind": "summary"
        }
        return Window(
            messages=[head, *kept],
            tokens=used + message_tokens(head, count),
            truncated=True,
            summary_used=True,
        )
    return Window(messages=kept, tokens=used, truncated=True)


def truncate_to_tokens(text: str, limit: int, count: CountTokens) -> str:
    """Longest prefix of ``text`` within ``limit`` tokens, cut at a line or word end."""
    if limit <= 0:
        return ""
    if count(text) <= limit:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    for sep in ("\n", " "):
        pos = cut.rfind(sep)
        if pos > len(cut) // 2:
            return cut[:pos].rstrip()
    return cut


def build_window(
    messages: Sequence[MessageDoc],
    summary: str | None,
    *,
    max_tokens: int,
    summary_budget: int,
    count: CountTokens,
    enforce_alternation: bool = True,
) -> Window:
    parts = split_roles(messages)
    chat = newest_alternating_run(parts.chat) if enforce_alternation else list(parts.chat)
    window = fit_tokens(chat, summary, max_tokens, summary_budget, count)
    window.system = parts.system
    window.tool = parts.tool
    window.dropped_by_alternation = len(parts.chat) - len(chat)
    return window
