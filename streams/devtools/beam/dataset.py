"""Reading BEAM chats (one folder per chat: ``chat.json`` and ``probing_questions.json``).

``chat.json`` is a list of batches ``{batch_number, time_anchor, turns}``; each
inner list of ``turns`` is one session of ``{role, id, content, time_anchor?}``
turns, ``id`` numbering the turns of the chat. A batch's first turn usually
carries a ``time_anchor`` (``March-15-2024``): the sessions of a batch are
spread evenly over the days from its anchor to the next batch's (the last
batch over the mean gap of the others, 14 days when there is none); a chat
with no anchor at all starts on 2024-01-01 with a session a day.

``probing_questions.json`` maps a question type to its questions; most name
their evidence turns in ``source_chat_ids``: a list of ids, or a dict of
lists (``original_info`` / ``updated_info`` for a knowledge update,
``first_*`` / ``second_*`` for the others). A question without ids is asked
and timed but not scored; ``abstention`` questions have none by design.

User turns (and in some chats assistant turns) end with the generator's plan
index (``->-> 1,2``, also ``->-> 2,N/A`` and ``->-> 5,14)``): it is not part
of what was said and is cut off.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

QUESTION_TYPES = (
    "information_extraction", "knowledge_update", "multi_session_reasoning",
    "temporal_reasoning", "contradiction_resolution", "event_ordering",
    "preference_following", "instruction_following", "summarization", "abstention",
)
UNDATED_START = datetime(2024, 1, 1)
DEFAULT_GAP_DAYS = 14.0
_PLAN_INDEX = re.compile(r"\s*->->\s*[^\s,]+\s*,\s*\S+\s*$")
_ANCHOR_FORMATS = ("%B-%d-%Y", "%b-%d-%Y", "%Y-%m-%d", "%B %d, %Y")


def parse_anchor(text: Any) -> datetime | None:
    for fmt in _ANCHOR_FORMATS:
        try:
            return datetime.strptime(str(text).strip(), fmt)
        except ValueError:
            continue
    return None


def clean_content(text: str) -> str:
    """The turn's text without the generator's trailing plan index."""
    return _PLAN_INDEX.sub("", text)


@dataclass(frozen=True)
class Turn:
    id: int
    role: str  # "user" | "assistant"
    content: str


@dataclass
class Session:
    number: int  # 1-based over the chat
    start: datetime
    turns: list[Turn] = field(default_factory=list)


@dataclass(frozen=True)
class Question:
    chat_id: str
    type: str
    question: str
    evidence: tuple[int, ...]  # every turn id the question names
    original: tuple[int, ...] = ()  # a knowledge update's original turns
    updated: tuple[int, ...] = ()  # ... and its updated turns


@dataclass
class Chat:
    chat_id: str
    sessions: list[Session] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    def turns(self) -> Iterator[tuple[Session, Turn]]:
        for s in self.sessions:
            for t in s.turns:
                yield s, t


def _ids(value: Any) -> list[int]:
    """Turn ids anywhere in ``value`` (ints, digit strings, lists, dicts), in order, once."""
    out: list[int] = []

    def walk(v: Any) -> None:
        if isinstance(v, bool):
            return
        if isinstance(v, int):
            if v not in out:
                out.append(v)
        elif isinstance(v, str) and v.strip().isdigit():
            walk(int(v.strip()))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return out


def parse_question(chat_id: str, qtype: str, raw: dict[str, Any]) -> Question:
    ids = raw.get("source_chat_ids")
    original: list[int] = []
    updated: list[int] = []
    if isinstance(ids, dict) and qtype == "knowledge_update":
        original = _ids(ids.get("original_info"))
        updated = _ids(ids.get("updated_info"))
    return Question(chat_id, qtype, str(raw.get("question", "")), tuple(_ids(ids)),
                    tuple(original), tuple(updated))


def _spread(batches: list[tuple[datetime | None, int]]) -> list[list[datetime]]:
    """Each batch's session start times: spread over the days to the next anchor."""
    anchors = [a for a, _ in batches]
    known = [a for a in anchors if a is not None]
    gaps = [(b - a).total_seconds() / 86400 for a, b in pairwise(known) if b > a]
    mean_gap = sum(gaps) / len(gaps) if gaps else DEFAULT_GAP_DAYS
    out: list[list[datetime]] = []
    day = UNDATED_START
    for i, (anchor, n) in enumerate(batches):
        start = anchor or day
        nxt = next((a for a in anchors[i + 1:] if a is not None), None)
        span = ((nxt - start).total_seconds() / 86400 if nxt is not None and nxt > start
                else mean_gap if known else float(n))
        step = span / max(n, 1)
        out.append([start + timedelta(days=step * k) for k in range(n)])
        day = start + timedelta(days=span)
    return out


def parse_chat(chat_id: str, chat: Any, questions: Any) -> Chat:
    if not isinstance(chat, list):
        raise ValueError(f"chat {chat_id}: chat.json holds a JSON list of batches")
    raw_batches: list[tuple[datetime | None, list[list[dict[str, Any]]]]] = []
    for b in chat:
        sessions = [s for s in (b.get("turns") or []) if isinstance(s, list)] \
            if isinstance(b, dict) else []
        anchor = parse_anchor(b.get("time_anchor")) if isinstance(b, dict) else None
        for s in sessions:
            for t in s:
                if anchor is None and isinstance(t, dict) and t.get("time_anchor"):
                    anchor = parse_anchor(t["time_anchor"])
        raw_batches.append((anchor, sessions))
    starts = _spread([(a, len(s)) for a, s in raw_batches])
    out = Chat(chat_id)
    for (_, sessions), times in zip(raw_batches, starts, strict=True):
        for raw, start in zip(sessions, times, strict=True):
            session = Session(len(out.sessions) + 1, start)
            for t in raw:
                if not isinstance(t, dict) or len(ids := _ids(t.get("id"))) != 1:
                    continue
                role = "assistant" if t.get("role") == "assistant" else "user"
                session.turns.append(Turn(ids[0], role,
                                          clean_content(str(t.get("content") or ""))))
            out.sessions.append(session)
    if isinstance(questions, dict):
        for qtype, items in questions.items():
            for raw_q in items if isinstance(items, list) else []:
                if isinstance(raw_q, dict):
                    out.questions.append(parse_question(chat_id, str(qtype), raw_q))
    return out


def _read_json(path: Path) -> Any:
    """A file's JSON; a file that cannot be read or parsed is a ValueError naming it."""
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc


def load_chat(folder: Path) -> Chat:
    chat = _read_json(folder / "chat.json")
    qfile = folder / "probing_questions.json"
    questions = _read_json(qfile) if qfile.is_file() else {}
    return parse_chat(folder.name, chat, questions)


def load_chats(root: Path) -> list[Chat]:
    """Every chat folder under ``root`` (or ``root`` itself when it is one), by name."""
    if (root / "chat.json").exists():
        return [load_chat(root)]
    folders = [p for p in root.iterdir() if (p / "chat.json").exists()]
    if not folders:
        raise ValueError(f"no chat folder (with a chat.json) under {root}")
    return [load_chat(p) for p in sorted(folders, key=lambda p: (not p.name.isdigit(),
                                                                  int(p.name) if p.name.isdigit()
                                                                  else 0, p.name))]
