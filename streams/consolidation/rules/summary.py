"""Session summaries: when one is due, an extractive one that needs no model, and
the model prompt.

The extractive summary keeps salient sentences, one line each as
``"speaker: sentence"`` in chronological order (remember requests, corrections
and lessons worded as the rule judge words them, without their marker):

========  ====================================================  ========
priority  what                                                  from
========  ====================================================  ========
5         requests to remember, corrections                     user
4         decisions ("let's …", "we decided …", "booked …", 决定)  both
3         preferences, facts about the user, agent lessons      user / assistant
2         events in the user's life                              user
1         a question with the first sentence of its answer      user, then assistant
========  ====================================================  ========

When everything does not fit ``budget_tokens``, units are taken by priority,
newer first on equal priority, skipping any that no longer fit; the chosen
lines are then printed in their original order. A question and its answer are
one unit. The result depends only on the input (no clock, no randomness).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from streams.consolidation.rules.llm_judge import clip_text, one_line
from streams.consolidation.rules.rule_judge import (
    FindingKind,
    classify_sentence,
    is_question,
    split_sentences,
)
from streams.memory.model import SourceMessage
from streams.tokens import CountTokens

SUMMARY_THRESHOLD = 20
LINE_MAX_CHARS = 300
CHAT_ROLES = ("user", "assistant")

_PRIORITY: dict[FindingKind, int] = {
    "remember": 5,
    "instruction": 5,
    "correction": 5,
    "preference": 3,
    "fact": 3,
    "lesson": 3,
    "event": 2,
}
_DECISION_PRIORITY = 4
_QA_PRIORITY = 1
_DECISION = re.compile(
    r"\b(?:let's|let us|we'll|we will|we decided|i decided|decided to|agreed|i'll go with"
    r"|i will go with|i'll take|i will take|booked|scheduled|confirmed|the plan is"
    r"|we're going to)\b|决定|就这么定|定了|确定了|预订了|安排在|那就",
    re.I,
)
_SMALL_TALK_QUESTION = re.compile(
    r"^(?:how are you|how's it going|what's up|how about you|and you|really|right|ok)\b"
    r"|你好吗|你呢|怎么样",
    re.I,
)


def needs_summary(unsummarized: int, threshold: int = SUMMARY_THRESHOLD) -> bool:
    """True once ``unsummarized`` messages (not covered by a summary) reach ``threshold``."""
    return unsummarized >= max(1, threshold)


@dataclass(frozen=True)
class _Unit:
    priority: int
    lines: tuple[str, ...]


def _who(m: SourceMessage) -> str:
    return m.name or m.role


def _salient(sentence: str, role: str) -> tuple[int, str] | None:
    """Priority and wording of a salient sentence (a remembered or corrected fact
    without its marker, as the rule judge words it)."""
    found = classify_sentence(sentence, role)
    if found is not None:
        return _PRIORITY[found.kind], found.text
    if _DECISION.search(sentence.replace("’", "'")) and not is_question(sentence):
        return _DECISION_PRIORITY, sentence
    return None


def _answer(messages: Sequence[SourceMessage], asked: int) -> SourceMessage | None:
    """The assistant message answering the user message at ``asked``, if any."""
    for m in messages[asked + 1 :]:
        if m.role == "assistant" and m.content.strip():
            return m
        if m.role == "user":
            return None
    return None


def _units(messages: Sequence[SourceMessage]) -> list[_Unit]:
    units: list[_Unit] = []
    for i, m in enumerate(messages):
        if m.role not in CHAT_ROLES:
            continue
        for sentence in split_sentences(m.content):
            salient = _salient(sentence, m.role)
            if salient is not None:
                priority, text = salient
                units.append(_Unit(priority, (f"{_who(m)}: {clip_text(text, LINE_MAX_CHARS)}",)))
                continue
            if m.role != "user" or not is_question(sentence):
                continue
            line = f"{_who(m)}: {clip_text(sentence, LINE_MAX_CHARS)}"
            if _SMALL_TALK_QUESTION.search(sentence) or len(sentence) < 8:
                continue
            answer = _answer(messages, i)
            reply = split_sentences(answer.content)[:1] if answer else []
            if answer and reply:
                answer_line = f"{_who(answer)}: {clip_text(reply[0], LINE_MAX_CHARS)}"
                units.append(_Unit(_QA_PRIORITY, (line, answer_line)))
    return units


def extractive_summary(
    messages: Sequence[SourceMessage],
    *,
    budget_tokens: int = 2000,
    count: CountTokens,
) -> str:
    """Salient sentences of ``messages`` (oldest first) within ``budget_tokens``.

    Each line costs ``count(line) + 1`` (the newline). Returns ``""`` when
    nothing is salient.
    """
    units = _units(messages)
    chosen: set[int] = set()
    used = 0
    for i in sorted(range(len(units)), key=lambda i: (-units[i].priority, -i)):
        cost = sum(count(line) + 1 for line in units[i].lines)
        if used + cost <= budget_tokens:
            chosen.add(i)
            used += cost
    lines = [line for i in sorted(chosen) for line in units[i].lines]
    return "\n".join(dict.fromkeys(lines))


SUMMARY_SYSTEM_PROMPT = """\
You maintain the running summary of a conversation between a user and an AI assistant.
Merge the previous summary (if any) and the new messages into one updated summary.
Keep facts about the people, their preferences, decisions and commitments, and questions \
with their answers; drop greetings and small talk; keep names, dates and numbers exactly.
Write plain text, one short line per item, oldest first, at most about {budget_tokens} \
tokens. Answer with the summary only.
"""


def build_summary_messages(
    previous_summary: str | None,
    messages: Sequence[SourceMessage],
    *,
    budget_tokens: int,
) -> list[dict[str, str]]:
    """Chat messages asking a model for the updated summary; only user and assistant
    messages are shown (system prompts and tool output are not conversation)."""
    lines = [
        f"{m.created_at.strftime('%Y-%m-%d %H:%M')} {_who(m)}: {one_line(m.content)}"
        for m in messages
        if m.role in CHAT_ROLES and m.content.strip()
    ]
    previous = (previous_summary or "").strip() or "(none)"
    user = f"Previous summary:\n{previous}\n\nNew messages:\n" + "\n".join(lines)
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT.format(budget_tokens=budget_tokens)},
        {"role": "user", "content": user},
    ]
