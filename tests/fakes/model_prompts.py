"""memstream's judge and conflict prompts read back, for scripted models.

The benchmarks answer the worker's model calls from a script: they need the
numbered user lines a judge prompt marks ``[NEW]`` (``rules/llm_judge.py``)
and, for each new memory of a conflict prompt (``rules/conflicts.py``), the
stored memories it is compared with. A change of either prompt's format shows
here first.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

JUDGE = "You extract durable"
CONFLICT = "You keep the long-term memory cube"

_NEW_USER_LINE = re.compile(r"(\d+)\. \[NEW\] \S+ \S+ user: (.+)$")
_NEW_MEMORY = re.compile(r"New memory (\d+) \(time [^)]*\): (.*)")
_STORED = re.compile(r"stored id=(\S+) \(time [^)]*\): (.*)")


def new_user_lines(prompt: str) -> list[tuple[int, str]]:
    """The ``[NEW]`` lines the user wrote: (their number, their text)."""
    return [(int(m.group(1)), m.group(2)) for line in prompt.splitlines()
            if (m := _NEW_USER_LINE.match(line))]


def judged(lines: list[tuple[int, str]]) -> str:
    """A judge's answer keeping ``lines`` as user memories."""
    return json.dumps([{"content": text, "type": "text", "scope": "user", "importance": 0.7,
                        "source": [n]} for n, text in lines], ensure_ascii=False)


@dataclass(frozen=True)
class NewMemory:
    index: int
    content: str
    stored: list[tuple[str, str]]  # (id, content) of the stored memories shown with it


def new_memories(prompt: str) -> list[NewMemory]:
    """Each new memory of a conflict prompt, with the stored ones it is compared with."""
    return [NewMemory(int(head.group(1)), head.group(2), _STORED.findall(block))
            for block in prompt.split("\n\n") if (head := _NEW_MEMORY.match(block))]


def decided(decisions: list[tuple[int, str, list[str]]]) -> str:
    """A conflict answer: (index, action, ids to expire) per new memory."""
    return json.dumps([{"index": i, "action": action, "expire_ids": ids}
                       for i, action, ids in decisions])
