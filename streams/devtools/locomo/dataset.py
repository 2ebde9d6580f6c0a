"""Reading LoCoMo files (the locomo10.json layout) into samples, turns and questions.

Layout: a list of ``{sample_id, conversation: {speaker_a, speaker_b,
session_N: [{speaker, dia_id, text, ...}], session_N_date_time}, qa:
[{question, answer, evidence, category}]}``. Categories 1–4 are scored
(multi-hop, temporal, open-domain, single-hop); 5 is adversarial. Some
evidence ids are malformed (``"D8:6; D9:17"``, ``"D:11:26"``): what can be
parsed is kept, nothing crashes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
SESSION_KEY = re.compile(r"session_(\d+)")
DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%d %B, %Y", "%Y-%m-%d")


def parse_evidence(items: Any) -> list[str]:
    """``D<session>:<turn>`` ids, also from malformed entries."""
    out: list[str] = []
    for item in items if isinstance(items, list) else [items]:
        for s, t in EVIDENCE.findall(str(item)):
            ref = f"D{int(s)}:{int(t)}"
            if ref not in out:
                out.append(ref)
    return out


def parse_date(text: Any) -> datetime | None:
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(str(text).strip(), fmt)
        except ValueError:
            continue
    return None


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass
class Session:
    key: str  # "session_3"
    number: int
    when: datetime | None
    turns: list[Turn] = field(default_factory=list)


@dataclass(frozen=True)
class Question:
    sample_id: str
    question: str
    category: int
    evidence: tuple[str, ...]  # "D1:3", ...


@dataclass
class Sample:
    sample_id: str
    sessions: list[Session] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def parse_samples(data: Any) -> list[Sample]:
    if not isinstance(data, list):
        raise ValueError("a LoCoMo file holds a JSON list of samples")
    out: list[Sample] = []
    for n, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise ValueError(f"sample {n} is not an object")
        sample = Sample(str(raw.get("sample_id", f"sample{n}")))
        talk = raw.get("conversation") or {}
        keys = [k for k, v in talk.items() if SESSION_KEY.fullmatch(k) and isinstance(v, list)]
        for key in sorted(keys, key=lambda k: int(k.split("_")[1])):
            session = Session(key, int(key.split("_")[1]), parse_date(talk.get(f"{key}_date_time")))
            for seq, turn in enumerate(talk[key]):
                if not isinstance(turn, dict):
                    continue
                session.turns.append(Turn(str(turn.get("dia_id", f"D{session.number}:{seq + 1}")),
                                          str(turn.get("speaker", "?")), str(turn.get("text", ""))))
            sample.sessions.append(session)
        for qa in raw.get("qa") or []:
            if isinstance(qa, dict) and qa.get("category") in CATEGORIES:
                sample.questions.append(Question(sample.sample_id, str(qa.get("question", "")),
                                                 int(qa["category"]),
                                                 tuple(parse_evidence(qa.get("evidence", [])))))
        out.append(sample)
    return out


def load_samples(path: Path) -> list[Sample]:
    return parse_samples(json.loads(path.read_text()))
