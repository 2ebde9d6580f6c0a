"""The rule judge: memories from new messages with no model, in English and Chinese.

Only messages marked new are read — their prose (:func:`.fact_quality.prose`:
no fenced code, quotes or tables, where examples are not what the speaker
says) — one sentence at a time, a user's run-on sentence one clause at a time
(:func:`clauses`). A sentence or clause yields at most one memory, of the first
kind that matches, and none that :func:`.fact_quality.defect` finds wanting (a
request, a dangling clause, markup …):

============  =============================================  ============  ==========
kind          example                                        type          importance
============  =============================================  ============  ==========
remember      "Please remember that my flat is number 12"    by content    0.9
instruction   "Always include version numbers when I ask     preference    0.9
              about dependencies" (:mod:`~streams.memory.
              rules.instructions`)
correction    "Actually, I live in Berlin now." / "其实…" /    by content    0.8
              "the response time has now improved to 250ms"
preference    "I love hiking." / "我不喜欢香菜"                preference    0.7
fact          "I work as a nurse." / "我住在上海" /              text          0.6
              "I'm using Flask 2.3.1" / "I've never
              deployed it to the cloud"
lesson        assistant: "Lesson learned: …"                 skill | tool  0.6
event         "Last week I went to a support group."         text          0.5
============  =============================================  ============  ==========

Questions are never facts ("Do you remember my name?"), except a request to
remember phrased as one ("Could you remember that I'm vegetarian?"). Small talk
("I'm fine", "I love it", "I have a question", "我有点累") matches nothing.

Scope: user facts, preferences and events come from ``user`` messages only and
go to scope ``user``. Scope ``agent`` is given to one narrow case: an
``assistant`` sentence that states a lesson explicitly ("Lesson learned: …",
"Note to self: …", "Next time I should …", "I learned that …", 经验：…,
下次应该…); its type is ``tool`` when it names a tool, API, command or
parameter, else ``skill``. Tool results are not read: they are raw data, and
the lesson drawn from them is what the assistant says afterwards. Anything
broader would turn ordinary assistant replies into agent memories.

Events become candidates of kind ``episode``, everything else ``fact``.
Wording is kept: the sentence itself (for remember requests and corrections,
the part after the marker), prefixed ``"Name: "`` when the message has a name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from streams.consolidation.rules.fact_quality import defect, prose
from streams.consolidation.rules.llm_judge import clip_text
from streams.consolidation.rules.subjects import CLOSED, claims, is_change
from streams.memory.model import (
    MAX_MEMORY_CHARS,
    MemoryCandidate,
    MemoryType,
    ScopeKind,
    SourceMessage,
)
from streams.memory.rules.instructions import standing_instruction
from streams.memory.rules.recency import announces_change, states_value

FindingKind = Literal["remember", "instruction", "correction", "preference", "fact", "lesson",
                      "event"]
IMPORTANCE: dict[FindingKind, float] = {
    "remember": 0.9,
    "instruction": 0.9,
    "correction": 0.8,
    "preference": 0.7,
    "fact": 0.6,
    "lesson": 0.6,
    "event": 0.5,
}


@dataclass(frozen=True)
class Finding:
    """What one sentence says, and the wording to keep."""

    kind: FindingKind
    text: str
    type: MemoryType = "text"
    scope: ScopeKind = "user"

    @property
    def importance(self) -> float:
        return IMPORTANCE[self.kind]


def _rx(*parts: str, flags: int = re.I) -> re.Pattern[str]:
    return re.compile("".join(parts), flags)


_SPLIT = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？；;])\s*|\n+")
_AUX = r"(?:do|does|did|can|could|would|will|should|shall|is|are|am|was|were|have|has|may)"
_EN_QUESTION = _rx(
    rf"^(?:{_AUX}\s+(?:you|i|we|they|he|she|it|u|there)\b",
    rf"|(?:what|where|when|who|whose|why|how|which)(?:'s|'re|\s+{_AUX}\b|\s+(?:many|much|long|old)\b))",
)
_ZH_QUESTION = re.compile(r"(?:吗|呢)[。.]?$|是不是|有没有|能不能|可不可以|对不对|好不好")

_POLITE_REMEMBER = _rx(
    r"^(?:please\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?remember\b",
    r"|^(?:请)?你?(?:能|可以|能不能|可不可以)(?:帮我)?(?:记住|记下)",
)
_EN_REMEMBER = _rx(
    r"^(?:(?:please|pls|and|also|oh|so|ok|okay)[,\s]+)*",
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?",
    r"(?:remember|keep\s+in\s+mind|don't\s+forget|do\s+not\s+forget|never\s+forget|note)",
    r"(?:\s+(?:that|this))?\s*[:,-]?\s*(?P<body>.*)$",
)
_ZH_REMEMBER = re.compile(
    r"^(?:请|麻烦)?你?(?:能|可以)?(?:帮我)?(?:记住|记下|记一下|记得|别忘了|不要忘了|不要忘记|别忘记)"
    r"[：:，,\s]*(?P<body>.+?)(?:吗)?[？?]?$"
)
_NOT_A_MEMORY_BODY = _rx(r"^(?:when|how|what|where|why|me|it|this|that|us)\b")

_EN_CORRECTION = _rx(
    r"^(?:actually|correction|sorry|oops|no|nope|wait|to be clear|i misspoke)\b",
    r"[,:;!.\s-]*(?P<body>.+)$",
)
_ZH_CORRECTION = re.compile(
    r"^(?:其实|不对|不是的|不是(?=[，,])|更正一下|更正|纠正一下|我说错了|说错了|我是说|我的意思是)"
    r"[，,：:。\s]*(?P<body>.+)$"
)
_I_MEANT = _rx(r"\bI\s+meant\b")
_EN_STATEMENT = _rx(r"^(?!(?:that|it|this|there)(?:'s|\s+is|\s+was)\b).*\b(?:is|are|was|were)\b")

_I_AM = r"I(?:\s+am|'m)"
_ADVERBS = (
    r"(?:(?:really|absolutely|truly|also|just|totally|still|do|generally|usually|actually"
    r"|no\s+longer)\s+)*"
)
_EN_PREFERENCE = _rx(
    rf"\b(?:I\s+{_ADVERBS}(?:like|love|prefer|enjoy|adore|hate|dislike|detest|loathe|can't stand",
    r"|cannot stand|don't like|do not like|don't love|don't enjoy|do not enjoy|don't eat",
    r"|don't drink|would\s+rather)",
    rf"|{_I_AM}\s+(?:really\s+)?(?:not\s+)?(?:a\s+|an\s+)?(?:big\s+|huge\s+)?fan\s+of",
    rf"|{_I_AM}\s+(?:really\s+|not\s+|no\s+longer\s+)?(?:into|interested\s+in|passionate\s+about)",
    r"|I'd\s+rather)\b\s*(?P<obj>.*)",
)
_EN_FAVOURITE = _rx(r"\bmy\s+(?:all-time\s+)?(?:favou?rite|fave|preferred)\s+\w+")
_FILLER_OBJECT = frozenset(
    {"it", "that", "this", "you", "them", "those", "these", "him", "her", "so", "much", "a"}
    | {"lot", "very", "too", "the", "idea", "way", "one", "all", "of", "to", "do", "please"}
    | {"thanks", "thank", "lol", "haha", "now", "again", "anymore", "still"}
)
_ZH_PREFERENCE = re.compile(
    r"我(?:真的|很|最|非常|特别|比较|也|还|更|一直|超|挺|蛮|已经|现在)*(?:不是很|不太|不怎么|没那么|不再|不)?"
    r"(?:喜欢|热爱|偏好|偏爱|讨厌|受不了|爱吃|爱喝|爱看|爱玩|爱听|爱)(?P<obj>.*)"
)
_ZH_FAVOURITE = re.compile(r"我最喜欢的|我(?:比较|更)?倾向于")

_SMALL_NOUNS = (
    r"question|idea|problem|doubt|minute|moment|second|sec|look|feeling|suggestion|request"
)
_EN_FACTS = [
    _rx(rf"\bmy\s+name\s+is\b|\b{_I_AM}\s+called\b"),
    _rx(
        r"\bI(?:\s+am|'m)?\s+(?:currently\s+|now\s+|still\s+|actually\s+|recently\s+|just\s+)?",
        r"(?:live|lived|grew\s+up|was\s+born|moved|relocated|reside|come\s+from|came\s+from",
        r"|living|based|from)\b",
    ),
    _rx(r"\bI(?:\s+am|'m)?\s+(?:currently\s+|now\s+|still\s+|actually\s+)?(?:work|worked|working)"
        r"\s+(?:as|at|for|in)\b"),
    _rx(r"\bI(?:\s+am|'m)?\s+(?:currently\s+|now\s+|still\s+)?(?:study|studied|studying|majored"
        r"|graduated|teach|taught|own|speak|volunteer)\b"),
    _rx(rf"\bI(?:\s+have|'ve\s+got|\s+have\s+got|\s+had)\s+(?!(?:a|an|no|some|any)\s+(?:{_SMALL_NOUNS}"
        r"|quick|few|bit|lot|clue|time|chance)\b)(?:a|an|two|three|four|five|\d+|no)\s+\w+"),
    _rx(r"\bI've\s+been\s+(?:working|living|studying|learning|playing|practi[cs]ing|married"
        r"|vegetarian|vegan|teaching|volunteering)\b"),
    _rx(r"\bI(?:\s+am|'m|\s+got)\s+(?:not\s+)?(?:originally\s+)?(?:\d+|allergic|married|single"
        r"|divorced|engaged|pregnant|retired|vegetarian|vegan|lactose|gluten|diabetic"
        r"|left-handed|right-handed|self-employed|unemployed|an\s+only\s+child)\b"),
    _rx(rf"\b{_I_AM}\s+(?:a|an)\s+(?!(?:bit|little|lot|big|huge)\b)\w+"),
    _rx(r"\b[Ii]\s*(?:am|'m)\s+(?!(?:OK|Okay|Fine|Good|Great|Sorry|Sure|Here|Back|Just|So|Not)\b)"
        r"[A-Z][a-z]+", flags=0),
    _rx(rf"\bmy\s+(?!(?:{_SMALL_NOUNS}|point|guess|bad|pleasure|concern|issue|answer|bet|turn"
        r"|fault|goodness|god|gosh|apologies|mistake)\b)[\w'-]+(?:\s+[\w'-]+){0,3}\s+(?:is|are)\b"),
]
_ZH_FACTS = re.compile(
    r"我叫|我的名字(?:是|叫)|我(?:现在|目前|一直)?(?:住在|住|搬到|搬去|定居在|来自|老家在|老家是|出生在|出生于)"
    r"|我(?:现在|目前)?在.{1,20}?(?:工作|上班|上学|读书|念书|实习)|我(?:今年)?(?:\d+|[一二三四五六七八九十]+)岁"
    r"|我是(?!说|不是|不|在|想|来|问|觉得|真的|认真的)|我的.{1,10}?(?:是|叫)"
    r"|我有(?!点|些|一点|个问题|问题|空|事|时间|个想法|个建议|疑问)"
    r"|我(?:对.{1,10}过敏|从事|毕业于|养了|结婚了|离婚了|已经结婚)"
)
_EN_EVENT = _rx(
    r"\bI\s+(?:just\s+|recently\s+|finally\s+|also\s+)?(?:went|visited|bought|started|finished",
    r"|joined|adopted|met|traveled|travelled|won|graduated|signed\s+up|attended|completed|quit",
    r"|launched|painted|wrote|ran|took\s+part|celebrated)\b\s*(?P<obj>.*)",
)
_ZH_EVENT = re.compile(
    r"我(?:昨天|前天|上周|上个月|去年|今天|刚刚|刚|最近|终于)?"
    r"(?:去了|买了|参加了|开始了|完成了|认识了|领养了|搬到了|报名了|毕业了)"
)

_EN_LESSON_MARKED = _rx(
    r"^(?:lessons?\s+learned|note\s+to\s+self|takeaway)\s*[:：-]\s*(?P<body>.+)$"
)
_ZH_LESSON_MARKED = re.compile(r"^(?:经验|教训|心得|备忘)[：:]\s*(?P<body>.+)$")
_LESSON = _rx(
    r"\bI(?:\s+have|'ve)?\s+(?:learned|learnt)\s+(?:that|to)\b",
    r"|\bnext\s+time,?\s+I(?:\s+(?:should|will|must|need\s+to)|'ll)\b|下次(?:我)?(?:应该|要|需要|得)|我学到了?",
)
_TOOL_WORDS = _rx(
    r"\b(?:tool|api|endpoint|command|function|parameter|argument|query|sql|cli|flag)s?\b",
    r"|工具|接口|命令|参数|函数",
)


_CLAUSE_BREAK = re.compile(
    r",\s+(?:but|so|especially|because|since|though|although)\s+"
    r"|,\s+and\s+(?=(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|our|it's|can|could)\b)"
    r"|,\s+(?=(?:i'm|i've|i\s+am|i\s+have|my)\b)"
    r"|;\s+|\s+[-–—]+\s+"
    r"|,\s+(?=(?:(?:and|so)\s+)?(?:can|could|would|will)\s+you\b|please\b|any\s+(?:ideas|tips"
    r"|advice|suggestions)\b|how\s+(?:can|do|should|would)\s+I\b|what\s+(?:do|should|would)\b)",
    re.I,
)
_FIRST_PERSON = _rx(r"\b(?:I|I'm|I've|I'd|I'll|my|we|we're|we've|our|me)\b")
_NEVER = _rx(r"\b(?:I|we)(?:'ve|\s+have)?\s+never\b|\b(?:I|we)\s+(?:haven't|have\s+not"
             r"|didn't|did\s+not)\s+(?:ever\s+|yet\s+|actually\s+)?(?!know|understand|get\b)\w+")
_VALUE_VERB = _rx(
    r"\b(?:I|we)(?:'ve|'m|'re|\s+am|\s+are|\s+have|\s+had|\s+was|\s+were)?\s+(?:\w+ly\s+)?"
    r"(?:got|have|had|completed|finished|done|solved|spent|scored|set|scheduled|booked|planned"
    r"|using|used|use|built|written|wrote|earned|earning|saved|deployed|released|tagged|merged"
    r"|created|implemented|integrated|added|reached|achieved|targeting|aiming|running|started"
    r"|made|submitted|received|secured|accepted|chosen|chose|decided|agreed|signed|negotiated"
    r"|logged|tracked|studied|practiced|practised|read|attended|taken|took|applied|uploaded"
    r"|mentored|mentoring|handled|collected|gathered|published|posted|sent|increased|reduced"
    r"|improved|adjusted|moved|extended|upgraded|switched|organized|organised|budgeted|paid"
    r"|allocated|dedicated|invested|hired|joined|enrolled|registered|bought|ordered|committed)"
    r"\b|\bmy\s+[\w-]+(?:\s+[\w-]+){0,3}\s+(?:is|are|was|were|has|have|had|ends?|starts?"
    r"|takes?|costs?|covers?|contains?|includes?)\b")


def clauses(sentence: str) -> list[str]:
    """A run-on sentence as its clauses: cut before "but", "so", "especially", a dash, a
    semicolon, "and I…", and before a request ("can you…", "please…"). Short sentences
    are one clause."""
    parts = [p.strip(" ,;") for p in _CLAUSE_BREAK.split(sentence)]
    return [p for p in parts if p]


_SPACES = re.compile(r"[^\S\n]{2,}")
MAX_SENTENCE_CHARS = 4000  # no fact is longer than 300 characters (fact_quality)


def split_sentences(text: str) -> list[str]:
    """Sentences: split after ``. ! ?`` and a space, after 。！？；; and at newlines; runs
    of spaces made one, and each cut to ``MAX_SENTENCE_CHARS`` (the patterns read each
    sentence several times: its length bounds their work)."""
    return [s.strip()[:MAX_SENTENCE_CHARS] for s in _SPLIT.split(_SPACES.sub(" ", text))
            if s and s.strip()]


def is_question(sentence: str) -> bool:
    s = sentence.strip().replace("’", "'")
    if s.endswith(("?", "？")) or _ZH_QUESTION.search(s):
        return True
    return bool(_EN_QUESTION.match(s))


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _meaningful_object(obj: str) -> bool:
    if _has_cjk(obj) or not obj.strip():
        cleaned = re.sub(r"[\W_]+", "", obj)
        return bool(cleaned) and not cleaned.startswith(("你", "它", "这", "那", "他", "她"))
    words = re.findall(r"[\w']+", obj.lower())
    if not words or words[0] in ("how", "what", "when", "where", "your"):
        return False
    return any(w not in _FILLER_OBJECT for w in words)


def is_preference(s: str) -> bool:
    if _EN_FAVOURITE.search(s) or _ZH_FAVOURITE.search(s):
        return True
    m = _EN_PREFERENCE.search(s) or _ZH_PREFERENCE.search(s)
    return m is not None and _meaningful_object(m.group("obj"))


def is_fact(s: str) -> bool:
    return any(p.search(s) for p in _EN_FACTS) or bool(_ZH_FACTS.search(s))


def _is_event(s: str) -> bool:
    m = _EN_EVENT.search(s)
    return bool(m and _meaningful_object(m.group("obj"))) or bool(_ZH_EVENT.search(s))


def _remembered(s: str) -> str | None:
    if is_question(s) and not _POLITE_REMEMBER.match(s):
        return None
    m = _EN_REMEMBER.match(s) or _ZH_REMEMBER.match(s)
    if not m:
        return None
    body = m.group("body").strip().rstrip("?？ ").strip()
    if body.lower().startswith("to "):
        return s.rstrip("?？ ")
    if _NOT_A_MEMORY_BODY.match(body) or (len(body.split()) < 2 and not _has_cjk(body)):
        return None
    return body or None


def _corrected(s: str) -> str | None:
    m = _EN_CORRECTION.match(s) or _ZH_CORRECTION.match(s)
    if m:
        body = m.group("body").strip()
        if is_preference(body) or is_fact(body):
            return body
        if _has_cjk(body):
            return body if "是" in body and len(body) >= 4 and body[0] not in "这那它" else None
        return body if len(body.split()) >= 3 and _EN_STATEMENT.match(body) else None
    return s if _I_MEANT.search(s) and len(s.split()) >= 3 else None


def _subject_statement(s: str) -> Finding | None:
    """A statement of what the speaker's home, job, diet, partner, pets … are (or no
    longer are), or a like said to have changed: a correction when it announces the
    change ("now", "no longer", "moved to", 不再 …), else a fact or preference."""
    found = claims(s)
    preference = is_preference(s)
    if not any(not c.key or c.key.split(":", 1)[0] in CLOSED for c in found) and not (
            found and is_change(s) and (preference or is_fact(s))):
        return None
    kind: FindingKind = "correction" if is_change(s) else "preference" if preference else "fact"
    return Finding(kind, s, "preference" if preference else "text")


def _lesson(s: str) -> Finding | None:
    m = _EN_LESSON_MARKED.match(s) or _ZH_LESSON_MARKED.match(s)
    text = m.group("body").strip() if m else s if _LESSON.search(s) else None
    if not text:
        return None
    return Finding("lesson", text, "tool" if _TOOL_WORDS.search(text) else "skill", "agent")


def _statement(s: str) -> Finding | None:
    """A first-person statement of a value (a number, a date, a version), of one that
    changed ("now at 250 ms", "moved the call to April 22", "the new deadline of
    April 5"), or of what the speaker never did: what a project's facts look like."""
    if not _FIRST_PERSON.search(s):
        return None
    if announces_change(s):
        return Finding("correction", s)
    if _NEVER.search(s):
        return Finding("fact", s)
    if states_value(s) and _VALUE_VERB.search(s):
        return Finding("fact", s)
    return None


def _user_finding(s: str) -> Finding | None:
    if (body := _remembered(s)) is not None:
        return Finding("remember", body, "preference" if is_preference(body) else "text")
    if standing_instruction(s):
        return Finding("instruction", s, "preference")
    if is_question(s):
        return None
    if (body := _corrected(s)) is not None:
        return Finding("correction", body, "preference" if is_preference(body) else "text")
    if (said := _subject_statement(s)) is not None:
        return said
    if is_preference(s):
        return Finding("preference", s, "preference")
    if is_fact(s):
        return Finding("fact", s)
    if _is_event(s):
        return Finding("event", s)
    return _statement(s)


def classify_sentence(sentence: str, role: str) -> Finding | None:
    """The memory one sentence (or clause) of a ``role`` message holds, if any: none that
    :func:`~.fact_quality.defect` finds wanting."""
    s = sentence.strip().replace("’", "'")
    if role == "assistant":
        found = None if is_question(s) else _lesson(s)
    elif role == "user":
        found = _user_finding(s)
    else:
        return None
    if found is None or found.kind == "remember":
        return found
    return found if defect(found.text) is None else None


def rule_judge(
    new_messages: Sequence[SourceMessage], *, max_chars: int = MAX_MEMORY_CHARS
) -> list[MemoryCandidate]:
    """Candidates from the new messages (messages with ``new=False`` are skipped): their
    prose (:func:`~.fact_quality.prose`: no code, quotes or tables) sentence by sentence,
    a user's run-on sentence clause by clause (:func:`clauses`)."""
    out: list[MemoryCandidate] = []
    for m in new_messages:
        if not m.new:
            continue
        for sentence in split_sentences(prose(m.content)):
            parts = clauses(sentence) if m.role == "user" else [sentence]
            if len(parts) > 1 and (whole := classify_sentence(sentence, m.role)) is not None \
                    and whole.kind in ("remember", "correction") and whole.text != sentence:
                parts = [sentence]  # "Actually, …" / "Please remember that …": said of the whole
            found = [f for c in parts if (f := classify_sentence(c, m.role)) is not None]
            for f in found:
                text = f"{m.name}: {f.text}" if m.name else f.text
                out.append(
                    MemoryCandidate(
                        content=clip_text(text, max_chars),
                        type=f.type,
                        scope=f.scope,
                        importance=f.importance,
                        source_event_ids=(m.event_id,),
                        event_time=m.created_at,
                        kind="episode" if f.kind == "event" else "fact",
                    )
                )
    return out
