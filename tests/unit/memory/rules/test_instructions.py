"""Standing instructions (:func:`standing_instruction`): orders for the assistant's later
answers, with a condition or a standing lead, in English and Chinese; small talk, the
user's own habits and one-off requests are not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.memory.rules.instructions import standing_instruction

ROOT = Path(__file__).resolve().parents[4]
LOCOMO_DEV = ROOT.parent / "shared" / "bench" / "locomo-dev.json"  # beside the checkout


@pytest.mark.parametrize("text", [
    "Always include version numbers when I ask about software dependencies or libraries used.",
    "Always use APA 7th edition citation style when I ask about formatting references.",
    "User: Always confirm salary figures when I ask about compensation details.",
    "Ann: always format dates as \"Month Day, Year\" whenever I ask about timeline details.",
    "Always use Scrivener’s split-screen mode for editing when I ask about draft revisions.",
    "Never use semicolons when I ask for SQL.",
    "Don't ever recommend paid tools if I ask about writing aids.",
    "Please always include type hints in your code examples.",
    "Make sure to cite sources in your answers.",
    "From now on, answer in Spanish.",
    "Going forward, please use metric units.",
    "In future, always give me the short version first.",
    "以后我问日期的时候，请用年月日格式。",
    "每次我问代码问题时，都要给出完整的示例。",
    "从现在开始请用中文回答。",
])
def test_instructions(text: str) -> None:
    assert standing_instruction(text)


@pytest.mark.parametrize("text", [
    "",
    "Always be yourself!",
    "Never give up on your dreams",
    "Don't worry about it",
    "Always happy to help",
    "I always use APA when I write.",  # the user's habit, not an order
    "I never use semicolons.",
    "Use APA for this one, please.",  # a one-off request
    "Can you always include type hints when I ask about Python?",  # a question
    "In the future I want to use React.",
    "From now on I will use React.",
    "Assistant: Always use parameterised queries when you build SQL strings.",
    "Never give them your password when they ask about your account.",
    "以后再说吧。",
    "我每次都用中文写。",
    "请问你能帮我看看这段代码吗？",
])
def test_not_instructions(text: str) -> None:
    assert not standing_instruction(text)


def test_a_long_message_is_read_at_its_start_only() -> None:
    assert standing_instruction("Always use bullet points when I ask about formatting. "
                                + "x " * 50_000)
    assert not standing_instruction("x " * 50_000 + "Always use bullet points when I ask.")


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="the LoCoMo dev conversations are not here")
def test_no_locomo_turn_is_read_as_one() -> None:
    """Two people chatting give each other advice ("Always believe in yourself"), never
    orders for an assistant's answers: none of their turns is lifted."""
    turns = [t["text"] for conv in json.loads(LOCOMO_DEV.read_text())
             for key, session in conv["conversation"].items()
             if key.startswith("session_") and isinstance(session, list) for t in session]
    assert len(turns) > 2500
    assert [t for t in turns if standing_instruction(t)] == []
