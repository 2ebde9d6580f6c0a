"""The model judge: its prompt and the validation and repair of its answer.

The model sees the whole session, one numbered line per message. New messages
are numbered ``1..k`` and marked ``[NEW]``; context messages, which were judged
before, are numbered ``c1..cm`` so that a ``source`` number can only ever point
at a new message and maps back to it with nothing but the new messages at hand.

Models answer sloppily, so :func:`parse_judge_output` repairs what it can: code
fences, prose around the JSON, an object wrapping the array, trailing commas,
truncation (open containers are closed and the incomplete last item dropped),
wrong types and missing fields. :class:`JudgeOutputError` means nothing usable
was found and the caller should fall back to the rule judge; an empty array is
a valid answer and yields ``[]``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any, cast

from streams.memory.model import (
    MAX_MEMORY_CHARS,
    MEMORY_TYPES,
    SCOPE_KINDS,
    MemoryCandidate,
    MemoryType,
    ScopeKind,
    SourceMessage,
)

DEFAULT_IMPORTANCE = 0.5

JUDGE_SYSTEM_PROMPT = """\
You extract durable long-term memories from a conversation.
Lines marked [NEW] (numbered 1, 2, ...) are new; lines numbered c1, c2, ... are \
earlier context that was already processed. Extract memories ONLY from [NEW] lines; \
use the context to resolve who and what they talk about, never to repeat it.

Keep what stays useful in later conversations:
- scope "user": facts about the user (identity, family, home, work, health, plans, \
events in their life) and their preferences;
- scope "agent": experience of the assistant itself: skills, procedures and lessons \
about tools that will help it with other users.
Types: "text" (a fact or event), "preference" (likes, dislikes, wishes), "skill" \
(how to do something), "tool" (how to use a tool or API).
Importance from 0 to 1: 0.9 for things the user asked to remember or corrected, \
0.7 for stable facts and preferences, 0.3 for minor details.
Each memory is one self-contained sentence of at most {max_chars} characters, in the \
speaker's own words where possible, naming the person instead of "he" or "she" and \
giving dates instead of "yesterday". Skip greetings, small talk and questions.
Return at most {max_items} memories.

Answer with ONLY a JSON array, no prose, for example:
[{{"content": "Caroline moved to Berlin in May 2023.", "type": "text", "scope": "user", \
"importance": 0.7, "source": [2]}}]
"source" lists the numbers of the [NEW] lines the memory comes from. \
If nothing is worth remembering, answer [].
"""


class UnparseableOutputError(ValueError):
    """No JSON array or object could be recovered from a model answer."""


class JudgeOutputError(UnparseableOutputError):
    """The judge's answer holds nothing parseable; fall back to the rule judge."""


def one_line(text: str) -> str:
    return " ".join(text.split())


def clip_text(text: str, max_chars: int = MAX_MEMORY_CHARS) -> str:
    """``text`` cut to ``max_chars``, at a word boundary when one is in the second half."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    if not text[max_chars].isspace():
        space = cut.rfind(" ")
        if space > max_chars // 2:
            cut = cut[:space]
    return cut.rstrip(" ,;:-")


def speaker(message: SourceMessage) -> str:
    return f"{message.name} ({message.role})" if message.name else message.role


def build_judge_messages(
    session: Sequence[SourceMessage], *, max_items: int = 20, max_chars: int = MAX_MEMORY_CHARS
) -> list[dict[str, str]]:
    """Chat messages for the judge: the instructions, then the numbered session."""
    lines: list[str] = []
    new_no = old_no = 0
    for m in session:
        when = m.created_at.strftime("%Y-%m-%d %H:%M")
        if m.new:
            new_no += 1
            label = f"{new_no}. [NEW]"
        else:
            old_no += 1
            label = f"c{old_no}."
        lines.append(f"{label} {when} {speaker(m)}: {one_line(m.content)}")
    system = JUDGE_SYSTEM_PROMPT.format(max_items=max_items, max_chars=max_chars)
    user = "Conversation:\n" + "\n".join(lines)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# --- JSON recovery -------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*[A-Za-z]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_MAX_STARTS = 64
_CLOSER_AHEAD = re.compile(r"\s*[\]}]")


def _structural(s: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """``(index, char)`` for the characters of ``s[start:]`` outside JSON strings."""
    in_str = esc = False
    for i in range(start, len(s)):
        ch = s[i]
        if not in_str:
            in_str = ch == '"'
            yield i, ch
        elif esc:
            esc = False
        elif ch == "\\":
            esc = True
        elif ch == '"':
            in_str = False


def _strip_trailing_commas(s: str) -> str:
    drop = {i for i, ch in _structural(s) if ch == "," and _CLOSER_AHEAD.match(s, i + 1)}
    return "".join(ch for i, ch in enumerate(s) if i not in drop) if drop else s


def _plausible(value: Any) -> bool:
    if isinstance(value, list):
        return not value or any(isinstance(v, dict | str) for v in value)
    return isinstance(value, dict) and bool(value)


def _starts(s: str) -> list[int]:
    return [i for i, ch in enumerate(s) if ch in "[{"][:_MAX_STARTS]


def _close_truncated(s: str, start: int) -> str | None:
    """``s[start:]`` cut after its last object that is an array item, then closed."""
    stack: list[str] = []
    cut: tuple[int, tuple[str, ...]] | None = None
    for i, ch in _structural(s, start):
        if ch in "[{":
            stack.append(ch)
        elif ch in "]}":
            if not stack or "[{"["]}".index(ch)] != stack[-1]:
                return None
            stack.pop()
            if not stack:
                return None  # complete but undecodable: malformed, not truncated
            if ch == "}" and stack[-1] == "[":
                cut = (i + 1, tuple(stack))
    if cut is None:
        return None
    end, open_ = cut
    closers = "".join("]" if c == "[" else "}" for c in reversed(open_))
    return s[start:end] + closers


def _decode(s: str) -> Any:
    """The first plausible value, trying every start in order: as complete JSON, then truncated."""
    decoder = json.JSONDecoder()
    for start in _starts(s):
        try:
            value, _ = decoder.raw_decode(s, start)
        except ValueError:
            repaired = _close_truncated(s, start)
            if repaired is None:
                continue
            try:
                value = json.loads(_strip_trailing_commas(repaired))
            except ValueError:
                continue
        if _plausible(value):
            return value
    raise UnparseableOutputError("no JSON value")


def extract_json(text: str) -> Any:
    """The first plausible JSON array or object in a model answer, repaired if needed.

    Tries the content of a code fence, then the whole text. Within each, every
    ``[`` or ``{`` is a possible start, outermost first; at each, complete JSON
    is tried (prose after it is ignored), then truncated JSON. Values that
    cannot be a list of items (``[1, 2]`` in prose) are passed over. Raises
    :class:`UnparseableOutputError` when nothing is found.
    """
    stripped = text.strip()
    if not stripped:
        raise UnparseableOutputError("empty answer")
    sources = [m.group(1) for m in _FENCE.finditer(stripped) if m.group(1).strip()][:1]
    sources = [_strip_trailing_commas(s) for s in [*sources, stripped]]
    for source in sources:
        try:
            return _decode(source)
        except UnparseableOutputError:
            continue
    raise UnparseableOutputError(f"no JSON array or object in the answer: {stripped[:80]!r}")


def items_of(value: Any, *, item_keys: Sequence[str], list_keys: Sequence[str]) -> list[Any]:
    """The list of items in a decoded answer: the array itself, the array an object
    wraps (preferring ``list_keys``), or a lone object that is itself an item."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        if any(k in value for k in item_keys):
            return [value]
        for key in list_keys:
            if isinstance(value.get(key), list):
                return list(value[key])
        for v in value.values():
            if isinstance(v, list):
                return v
    raise UnparseableOutputError("the JSON holds no list of items")


# --- field repair --------------------------------------------------------------

_IMPORTANCE_WORDS = {"high": 0.8, "medium": 0.5, "normal": 0.5, "low": 0.2}
_TYPE_ALIASES = {"pref": "preference", "fact": "text", "event": "text"}
_SCOPE_ALIASES = {"assistant": "agent", "self": "agent"}
_NEW_LINE_NUMBER = re.compile(r"(?<![A-Za-z\d])\d+")


def importance_of(value: Any, default: float = DEFAULT_IMPORTANCE) -> float:
    """0..1; numbers above 1 are read as a 0–10 scale (≤ 10) or percent (≤ 100)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return default
    if isinstance(value, str):
        s = value.strip().lower()
        if s in _IMPORTANCE_WORDS:
            return _IMPORTANCE_WORDS[s]
        try:
            v = float(s.rstrip("%")) / (100 if s.endswith("%") else 1)
        except ValueError:
            return default
    else:
        v = float(value)
    if not math.isfinite(v):
        return default
    if v > 1:
        v = v / 10 if v <= 10 else v / 100 if v <= 100 else 1.0
    return min(1.0, max(0.0, v))


def type_of(value: Any) -> MemoryType:
    """A known type (plurals, ``*_mem`` and a few aliases accepted), else ``"text"``."""
    s = value.strip().lower().removesuffix("_mem") if isinstance(value, str) else ""
    for name in (s, s.removesuffix("s")):
        name = _TYPE_ALIASES.get(name, name)
        if name in MEMORY_TYPES:
            return cast(MemoryType, name)
    return "text"


def scope_of(value: Any) -> ScopeKind:
    s = value.strip().lower() if isinstance(value, str) else ""
    s = _SCOPE_ALIASES.get(s, s)
    return cast(ScopeKind, s) if s in SCOPE_KINDS else "user"


def line_numbers(value: Any) -> list[int]:
    """Numbers of ``[NEW]`` lines in an int, a string like ``"1, 3"`` or a list of them."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, float) and value.is_integer():
        return [int(value)]
    if isinstance(value, str):
        return [int(d) for d in _NEW_LINE_NUMBER.findall(value)]
    if isinstance(value, list | tuple):
        return [n for v in value if not isinstance(v, list | tuple) for n in line_numbers(v)]
    return []


def _first(item: dict[str, Any], keys: Sequence[str]) -> Any:
    return next((item[k] for k in keys if k in item), None)


def parse_judge_output(
    text: str, new_messages: Sequence[SourceMessage], *, max_chars: int = MAX_MEMORY_CHARS
) -> list[MemoryCandidate]:
    """Memory candidates from the judge's answer; see the module docstring for repairs.

    Items whose content is missing, not a string (a bare string item is taken as
    the content) or blank are dropped. ``source`` numbers outside ``1..k`` are
    ignored; with none left the memory is attributed to all new messages. The
    event time is the newest ``created_at`` of its source messages.
    """
    try:
        value = extract_json(text)
        items = items_of(value, item_keys=("content", "memory"), list_keys=("memories", "items"))
    except UnparseableOutputError as exc:
        raise JudgeOutputError(str(exc)) from exc
    out: list[MemoryCandidate] = []
    for item in items:
        fields: dict[str, Any] = item if isinstance(item, dict) else {"content": item}
        content = _first(fields, ("content", "memory", "text"))
        if not isinstance(content, str) or not content.strip():
            continue
        numbers = line_numbers(_first(fields, ("source", "sources", "source_lines", "lines")))
        valid = [n for n in dict.fromkeys(numbers) if 1 <= n <= len(new_messages)]
        sources = [new_messages[n - 1] for n in valid] or list(new_messages)
        out.append(
            MemoryCandidate(
                content=clip_text(one_line(content), max_chars),
                type=type_of(_first(fields, ("type", "category", "memory_type"))),
                scope=scope_of(fields.get("scope")),
                importance=importance_of(fields.get("importance")),
                source_event_ids=tuple(m.event_id for m in sources),
                event_time=max((m.created_at for m in sources), default=None),
            )
        )
    return out
