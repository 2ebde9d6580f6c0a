"""What a statement says about its speaker: subject claims, in English and Chinese.

A claim is a subject (``key``), a value, and whether the statement says the
value no longer holds: "I live in Porto" claims ``residence = porto``; "I don't
live in Porto anymore" claims ``residence = porto``, negated; "I've moved from
Porto to Lisbon" claims both, and "I switched from tea to coffee" claims that
``tea`` was left, whichever subject held it (key ``""``). Subjects:

``residence``, ``employer``, ``occupation``, ``diet``, ``status`` (single,
married, ...), ``partner``, ``pet:<species>`` (value ``+``/``-``),
``pet name:<species>``, ``name``, ``age``, ``favourite:<thing>``,
``likes:<object>`` (value ``+``/``-``) and ``my:<noun>`` for any other
"my X is Y". Each subject holds one value at a time: a new value replaces the
old. A user may have several pets or like several things, so the species and
the object are part of those keys.

A statement is read clause by clause (after ``;`` and ``,``, or "and" / "but"
before a new clause; Chinese after every comma), with fillers dropped
("actually", "now", "still", 其实, 现在, 已经 …) and a clause with no subject
taking the "I" of the one before ("I changed careers and now work as a nurse").
Claims belong to the speaker of ``"Name: text"``; a claim about someone else
("my friend moved to Berlin", 我朋友搬到了上海) is no claim about the speaker.

:func:`is_change` tells the ways people announce that something changed
("actually", "now", "moved to", "no longer", "changed", "switched to",
"not … anymore", 其实, 现在, 搬到, 不再, 换, 改, 跳槽 …).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from streams.consolidation.rules.dedup import contains, normalize, split_speaker
from streams.consolidation.rules.subject_patterns import (
    DIET_VALUES,
    EN,
    SPECIES_VALUES,
    STATUS_VALUES,
    ZH,
    Pattern,
    job_like,
)


@dataclass(frozen=True)
class Claim:
    speaker: str | None
    key: str  # "" : the value was left, whatever subject held it
    value: str
    negated: bool = False


_CJK = re.compile(r"[\u4e00-\u9fff]")
_EN_FILLERS = re.compile(
    r"\b(?:actually|currently|still|really|also|just|honestly|nowadays|right now|these days"
    r"|at the moment|by the way|anyway|now)\b,?", re.I)
_EN_LEAD = re.compile(r"^(?:(?:so|well|oh|ok|okay|yes|yeah|hey|btw|and|but|then|correction"
                      r"|sorry|wait|no|nope|i mean)\b[\s,:;-]*)+", re.I)
_EN_TRAIL = re.compile(
    r"\s+(?:anymore|any more|again|too|as well|either|recently|lately|today|for now"
    r"|(?:last|this|next) (?:week|weekend|month|year|spring|summer|autumn|fall|winter)"
    r"|(?:(?:a|one|two|three|four|five|six|\d+|a few|a couple of|several) )?"
    r"(?:days?|weeks?|months?|years?) ago"
    r"|for (?:work|my job|a while|years|ages|(?:a|one|two|three|four|five|six|\d+|a few"
    r"|several) (?:days?|weeks?|months?|years?))"
    r"|in (?:january|february|march|april|may|june|july|august|september|october|november"
    r"|december|\d{4})|since \d{4})$", re.I)
_EN_SUBJECTS = re.compile(
    r"^(?:i|i'm|i've|i'd|i'll|we|we're|we've|my|our|you|your|he|she|they|it|its|it's|the|this"
    r"|that|there|a|an|his|her|their|someone|people)\b|^[\w-]+ and i\b", re.I)
_EN_CLAUSES = re.compile(
    r"(\s*[;,]\s*(?=(?:i|i'm|i've|we|my|now|then|and|but|so)\b)"
    r"|\s+(?:and|but|so)\s+(?=(?:i|i'm|i've|we|my|now|then|also|joined|moved|started"
    r"|became|got|work|live|am|quit|left)\b))", re.I)
_ZH_CLAUSES = re.compile(r"[，,；;、]|然后|但是")
_ZH_LEAD = re.compile(
    r"^(?:其实|不对|更正一下|更正|现在|目前)*(?P<who>我们|我)?"
    r"(?:其实|现在|目前|已经|也|还|一直|最近|刚刚|刚|上个月|上周|去年|今年|前不久|终于)*")
_ZH_OTHERS = re.compile(r"^(?:你|他|她|它|他们|她们|这|那|朋友|我的?(?:朋友|姐姐|哥哥|妹妹|弟弟"
                        r"|妈妈|爸爸|父母|邻居|同事|孩子|儿子|女儿))")
_SPELLING = {"favorite": "favourite", "color": "colour", "flavor": "flavour"}
_CHANGE = re.compile(
    r"\b(?:actually|now|no longer|any ?more|moved|relocated|changed|switched|became|joined"
    r"|left|quit|stopped|started|got married|got engaged|got divorced|broke up|these days"
    r"|nowadays|again)\b|其实|现在|目前|搬|换|改|跳槽|转行|不再|已经|开始|分手|离婚|结婚了|去世",
    re.I)


def is_change(text: str) -> bool:
    """Whether ``text`` announces a change or a correction ("actually", "now", 其实 …)."""
    return bool(_CHANGE.search(text.replace("’", "'")))


def _value(text: str) -> str:
    words = normalize(text).split()
    while words and words[0] in ("a", "an", "the", "my", "our"):
        words = words[1:]
    return " ".join(_SPELLING.get(w, w) for w in words).rstrip("了啦呢")


def _clauses(body: str) -> list[str]:
    """Cleaned clauses; one with no subject takes the "I" (我) of the clause before."""
    out: list[str] = []
    if _CJK.search(body):
        mine = False
        for part in _ZH_CLAUSES.split(body):
            part = part.strip(" 。！!.？?")
            m = _ZH_LEAD.match(part)
            rest = part[m.end():] if m else part
            if m and m.group("who"):
                mine = True
                part = m.group("who") + rest
            elif mine and rest and not _ZH_OTHERS.match(rest):
                part = "我" + rest
            else:
                mine = False
            out.append(part)
        return out
    mine = False
    pieces = _EN_CLAUSES.split(body)  # clause, separator, clause, ...
    parts = [pieces[0]]
    for sep, piece in zip(pieces[1::2], pieces[2::2], strict=True):
        if len(parts[-1].split()) == 1 and sep.strip() == "and":  # "Anna and I broke up"
            parts[-1] += sep + piece
        else:
            parts.append(piece)
    for part in parts:
        part = _EN_LEAD.sub("", _EN_FILLERS.sub(" ", part))
        part = " ".join(part.split()).strip(" .!?;:,-")
        while (cut := _EN_TRAIL.sub("", part)) != part:
            part = cut.strip(" ,")
        if not part:
            continue
        if _EN_SUBJECTS.match(part):
            mine = part.lower().startswith(("i ", "i'", "we ", "we'", "my ", "our "))
        elif mine:
            part = "I " + part
        out.append(part)
    return out


def _claims_of(p: Pattern, m: re.Match[str], who: str | None) -> list[Claim]:
    g = {k: v for k, v in m.groupdict().items() if v}
    neg = "neg" in g or not p.key
    value = p.value or _value(g.get("v", ""))
    if p.key == "diet" or p.key == "status":
        value = DIET_VALUES.get(value, STATUS_VALUES.get(value, value))
        if p.key == "diet" and neg and value == "omnivore":  # "I don't eat meat"
            value, neg = "vegetarian", False
    key = p.key
    if "{s}" in key:
        species = _value(g["s"])
        species = SPECIES_VALUES.get(species, species.removesuffix("s"))
        key = key.replace("{s}", species)
    if "{k}" in key:
        key = key.replace("{k}", _value(g["k"]))
    if key.startswith(("likes:", "pet:")):
        if key.startswith("likes:"):
            key = "likes:" + _value(g["v"])
        value, neg = ("-" if neg or p.value == "-" else "+"), False
    if not value or (p.loose and not job_like(value)):
        return []
    out = [Claim(who, key, value, neg)]
    if "old" in g:
        out.append(Claim(who, key, _value(g["old"]), True))
    if "n" in g:
        out.append(Claim(who, key.replace("pet:", "pet name:"), _value(g["n"])))
    if "p" in g:
        out.append(Claim(who, "partner", _value(g["p"])))
    if "gone" in g:
        out.append(Claim(who, "partner", _value(g["gone"]), True))
    return out


@lru_cache(maxsize=8192)
def claims(text: str) -> tuple[Claim, ...]:
    """What ``text`` claims about its speaker, clause by clause (see the module doc)."""
    speaker, body = split_speaker(text.replace("’", "'").replace("‘", "'"))
    who = speaker.casefold() if speaker else None
    out: list[Claim] = []
    for clause in _clauses(body):
        for p in ZH if _CJK.search(clause) else EN:
            m = p.regex.match(clause)
            if m and (found := _claims_of(p, m, who)):
                out.extend(found)
                break
    return tuple(dict.fromkeys(out))


CLOSED = frozenset(("residence", "employer", "occupation", "diet", "status", "partner", "pet",
                    "pet name", "name", "age"))


def closed_subjects(found: Sequence[Claim]) -> bool:
    """Whether every claim is of a subject with a closed meaning (not ``likes:…``,
    ``favourite:…`` or ``my:…``, whose keys hold free text)."""
    return bool(found) and all(c.key.split(":", 1)[0] in CLOSED for c in found)


def subject_keys(text: str) -> tuple[str, ...]:
    """The subjects ``text`` speaks of, as index terms: ``§<key>`` (``§<key>@<speaker>``
    for a named speaker), a short hash when that is longer than 64 characters."""
    out: list[str] = []
    for c in claims(text):
        if c.key:
            term = f"§{c.key}@{c.speaker}" if c.speaker else f"§{c.key}"
            if len(term) > 64:
                term = "§" + hashlib.sha1(term.encode()).hexdigest()[:20]
            out.append(term)
    return tuple(dict.fromkeys(out))


ClaimRelation = Literal["conflict", "duplicate", "subsumes"]


def _held(c: Claim) -> str | None:
    """What a positive claim says the speaker has, likes or is (for a left value)."""
    if c.negated or c.value == "-":
        return None
    return c.key.split(":", 1)[1] if c.key.startswith(("likes:", "pet:")) else c.value


def _aim(value: str) -> bool:
    """A value that is an aim or an account ("to improve the maintainability score"),
    not the value of a slot ("April 5", "senior data engineer"): many can hold at once."""
    return value.startswith(("to ", "that ", "about ", "how "))


def relation(new: Sequence[Claim], old: Sequence[Claim], *,
             changed: bool = False) -> ClaimRelation | None:
    """How the claims of a new statement relate to a stored one's: ``conflict`` (a
    different value of a subject, or the same value affirmed and denied), else
    ``duplicate`` (the same value said the same way), else ``subsumes`` (the new
    value contains the stored one), else None (nothing in common).

    Two different aims of a ``my:…`` subject ("My goal is to improve the expense
    classification" / "My goal is to further improve the maintainability score")
    are both held, not a conflict, unless the new statement announces a change
    (``changed``: "My goal is now to …")."""
    found: set[ClaimRelation] = set()
    for a in new:
        for b in old:
            if a.speaker != b.speaker or not b.key:
                continue
            if not a.key:  # a value left: the subject holding it no longer does
                if a.value == _held(b):
                    found.add("conflict")
            elif a.key == b.key:
                if a.value == b.value or contains(b.value, a.value):
                    found.add("duplicate" if a.negated == b.negated else "conflict")
                elif contains(a.value, b.value):
                    found.add("subsumes" if a.negated == b.negated else "conflict")
                elif not a.negated and not b.negated and (
                        changed or not a.key.startswith("my:")
                        or not (_aim(a.value) or _aim(b.value))):
                    found.add("conflict")
    order: tuple[ClaimRelation, ...] = ("conflict", "duplicate", "subsumes")
    return next((r for r in order if r in found), None)
