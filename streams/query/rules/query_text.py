"""The text a long-term memory search runs with.

The user's new message, plus at most the first 200 characters of the context
when the request carries one: the context helps with short follow-ups
("and the other one?") without drowning the message in a long prompt.
"""

from __future__ import annotations

DEFAULT_MAX_CONTEXT_CHARS = 200


def build_query_text(
    message: str, context: str | None = None, *, max_context_chars: int = DEFAULT_MAX_CONTEXT_CHARS
) -> str:
    """``message``, then a newline and the first ``max_context_chars`` of ``context``.

    Surrounding whitespace is removed from both; an empty or blank context adds
    nothing, and neither does a non-positive ``max_context_chars``.
    """
    text = message.strip()
    extra = (context or "").strip()[: max(0, max_context_chars)].strip()
    if not extra:
        return text
    return f"{text}\n{extra}" if text else extra
