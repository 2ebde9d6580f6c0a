"""Conflicts between new candidates and stored memories: store, skip or supersede.

Rules (:func:`decide_by_rules`), per stored memory found for a candidate:

* **Same subject slot.** Simple statements name a slot and a value: ``my name
  is X``, ``I live in X``, ``I work at|for X``, ``I work as X``, ``I'm N``,
  ``my favourite F is X``, ``my F is X``, ``I like X`` / ``I don't like X``
  (slot "likes X", value = polarity), and the Chinese forms (我叫 / 我住在 /
  我在…工作 / 我最喜欢的F是 / 我的F是 / 我喜欢 / 我不喜欢 …). Slots belong to a
  speaker: ``"Caroline: I live in X"`` and ``"Melanie: I live in Y"`` are
  different subjects, and so are a named and an unnamed statement. Same slot,
  same value → duplicate; same slot, the candidate's value contains the
  stored one → the candidate is more complete; otherwise → conflict.
* **Text.** Without a common slot: equal after normalising, the candidate
  contained in the stored text, or :func:`~streams.consolidation.rules.dedup.similarity` ≥
  ``duplicate_threshold`` → duplicate; the stored text contained in the
  candidate → the candidate is more complete; else unrelated.

Then: any duplicate → **skip**. A conflict → **supersede** (expire the
conflicting and the less complete memories) when the candidate is newer than
every conflicting memory: its event time is later, or the stored memory has
none. A candidate that is not newer than a memory it contradicts is **skipped**:
it is stale (e.g. an older session re-driven from the dead-letter topic after
a newer fact was stored), and storing it alongside would leave two valid,
contradicting memories; its source messages keep the history. Only more
complete → supersede. Nothing related → **store**.

A decision made in an earlier hold of the cube's lock (a run resumed after a
crash) is checked once more before its memory is written
(:func:`stored_meanwhile`): a memory saying the same, stored since by another
run, turns it into a **skip**.

The default ``duplicate_threshold`` (0.8) is stricter than the in-batch dedup
Jaccard (0.7): stored memories come from a search and are on-topic already,
so a loose threshold would skip genuinely new facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from streams.clock import aware_utc
from streams.consolidation.rules.dedup import contains, normalize, similarity, split_speaker
from streams.consolidation.rules.llm_judge import (
    UnparseableOutputError,
    extract_json,
    items_of,
    one_line,
)
from streams.consolidation.rules.subjects import (
    Claim,
    claims,
    closed_subjects,
    is_change,
    relation,
)
from streams.memory.model import MemoryCandidate, StoredMemory

Action = Literal["store", "skip", "supersede"]  # a decision, as the run store records it
Relation = Literal["unrelated", "duplicate", "subsumes", "conflict"]


@dataclass(frozen=True)
class Decision:
    candidate: MemoryCandidate
    action: Action
    expire_ids: list[str] = field(default_factory=list)
    reason: str = ""


class ConflictOutputError(UnparseableOutputError):
    """The conflict model's answer holds nothing parseable; decide by rules."""


Slot = Claim  # what one statement says of one subject


def subject_slot(text: str) -> Slot | None:
    """The first subject ``text`` speaks of (:func:`~.subjects.claims`), or None."""
    return next((c for c in claims(text) if c.key), None)


_FILLER_WORDS = frozenset(("actually", "now", "currently", "still", "really", "also", "just",
                           "honestly", "nowadays", "anymore", "其实", "现在", "目前", "还", "也"))


def _core(text: str) -> str:
    """The normalised text without its fillers ("still", "now", 其实 …)."""
    return " ".join(w for w in normalize(split_speaker(text)[1]).split()
                    if w not in _FILLER_WORDS)


def _relation(cand: MemoryCandidate, cand_claims: Sequence[Claim], mem: StoredMemory,
              threshold: float) -> Relation:
    mem_claims = claims(mem.content)
    rel = relation(cand_claims, mem_claims, changed=is_change(cand.content))
    if rel == "duplicate":  # the same values, but the candidate may say more
        nc, nm = _core(cand.content), _core(mem.content)
        return "subsumes" if nc != nm and contains(nc, nm) else "duplicate"
    if rel is not None:
        return rel
    if closed_subjects(cand_claims) and closed_subjects(mem_claims):
        return "unrelated"  # both say what they are about, and it differs
    names = (split_speaker(cand.content)[0], split_speaker(mem.content)[0])
    if len({n.casefold() for n in names if n}) > 1:
        return "unrelated"
    nc, nm = normalize(cand.content), normalize(mem.content)
    if nc == nm or contains(nm, nc) or similarity(cand.content, mem.content) >= threshold:
        return "duplicate"
    return "subsumes" if contains(nc, nm) else "unrelated"


def is_newer(cand: MemoryCandidate, mem: StoredMemory) -> bool:
    """The candidate's event time is later than the stored one's, or the stored has none."""
    if mem.event_time is None:
        return True
    return cand.event_time is not None and aware_utc(cand.event_time) > aware_utc(mem.event_time)


def decide_by_rules(
    candidate: MemoryCandidate,
    existing: Sequence[StoredMemory],
    *,
    duplicate_threshold: float = 0.8,
) -> Decision:
    cand_claims = claims(candidate.content)
    found: dict[Relation, list[StoredMemory]] = {"duplicate": [], "subsumes": [], "conflict": []}
    for mem in existing:
        rel = _relation(candidate, cand_claims, mem, duplicate_threshold)
        if rel != "unrelated":
            found[rel].append(mem)

    def ids(mems: Sequence[StoredMemory]) -> list[str]:
        return list(dict.fromkeys(m.id for m in mems))

    if found["duplicate"]:
        return Decision(candidate, "skip", [], f"duplicate of {', '.join(ids(found['duplicate']))}")
    if found["conflict"]:
        stale = [m for m in found["conflict"] if not is_newer(candidate, m)]
        if stale:
            return Decision(
                candidate, "skip", [], f"not newer than contradicting {', '.join(ids(stale))}"
            )
        expire = ids([*found["conflict"], *found["subsumes"]])
        return Decision(candidate, "supersede", expire, f"newer value than {', '.join(expire)}")
    if found["subsumes"]:
        expire = ids(found["subsumes"])
        return Decision(candidate, "supersede", expire, f"more complete than {', '.join(expire)}")
    return Decision(candidate, "store", [], "no stored memory says the same or the opposite")


def own_copy(candidate: MemoryCandidate, mem: StoredMemory, *, write_started: bool) -> bool:
    """Whether ``mem`` may be ``candidate`` itself, stored by an earlier attempt of its run:
    the same text from the same source events, or, when that attempt had started
    writing, the same text from a provider that returned no source events."""
    if normalize(mem.content) != normalize(candidate.content):
        return False
    theirs, ours = set(mem.source_event_ids), set(candidate.source_event_ids)
    if theirs and ours:
        return theirs == ours
    return write_started


def stored_meanwhile(
    candidate: MemoryCandidate,
    found: Sequence[StoredMemory],
    *,
    write_started: bool = False,
    duplicate_threshold: float = 0.8,
) -> list[str]:
    """Ids of the memories of ``found`` that say what ``candidate`` says (a duplicate,
    as :func:`decide_by_rules` sees it) and are not its own copy (:func:`own_copy`).

    A candidate whose decision was made in an earlier hold of the cube's lock and is
    not written yet is skipped when there are any: another run stored the same since.
    """
    cand_claims = claims(candidate.content)
    return list(dict.fromkeys(
        m.id for m in found
        if not own_copy(candidate, m, write_started=write_started)
        and _relation(candidate, cand_claims, m, duplicate_threshold) == "duplicate"))


# --- model path: one call per cube batch ----------------------------------------

CONFLICT_SYSTEM_PROMPT = """\
You keep the long-term memory cube "{cube}" consistent. For each NEW memory you \
see the stored memories a search found for it. Decide one action per new memory:
- "store": it adds information; nothing stored is replaced;
- "skip": a stored memory already says the same, or more;
- "supersede": store it and retire stored memories it contradicts or makes obsolete \
(a newer value for the same thing, e.g. a new address or a flipped preference); list \
their ids in "expire_ids". Only ids shown under that new memory may be listed.
A new memory that is OLDER than a stored memory contradicting it is stale: skip it.
Answer with ONLY a JSON array, one object per new memory, for example:
[{{"index": 1, "action": "supersede", "expire_ids": ["m-17"], "reason": "moved"}}]
"""


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M") if t else "unknown"


def build_conflict_messages(
    cube: str,
    candidates: Sequence[MemoryCandidate],
    existing: Sequence[Sequence[StoredMemory]],
) -> list[dict[str, str]]:
    """``existing[i]`` holds the stored memories found for ``candidates[i]``."""
    if len(existing) != len(candidates):
        raise ValueError("existing must hold one list of stored memories per candidate")
    blocks: list[str] = []
    for n, (cand, mems) in enumerate(zip(candidates, existing, strict=True), 1):
        lines = [f"New memory {n} (time {_when(cand.event_time)}): {one_line(cand.content)}"]
        lines += [
            f"  stored id={m.id} (time {_when(m.event_time)}): {one_line(m.content)}" for m in mems
        ]
        blocks.append("\n".join(lines if mems else [*lines, "  (no stored memories found)"]))
    return [
        {"role": "system", "content": CONFLICT_SYSTEM_PROMPT.format(cube=cube)},
        {"role": "user", "content": "\n\n".join(blocks)},
    ]


_ACTIONS: dict[str, Action] = {
    "store": "store", "add": "store", "new": "store", "insert": "store", "keep": "store",
    "skip": "skip", "duplicate": "skip", "ignore": "skip", "none": "skip",
    "supersede": "supersede", "replace": "supersede", "update": "supersede", "expire": "supersede",
}  # fmt: skip


def _index(item: dict[str, Any]) -> int | None:
    for key in ("index", "candidate", "new_memory", "n", "id"):
        v = item.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().isascii() and v.strip().isdigit():
            return int(v.strip())
    return None


def _ids(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value] if value is not None else []
    return [str(v).strip() for v in values if isinstance(v, str | int) and not isinstance(v, bool)]


def _model_decision(
    item: dict[str, Any], cand: MemoryCandidate, shown: Sequence[StoredMemory]
) -> Decision | None:
    action = _ACTIONS.get(str(item.get("action", "")).strip().lower())
    if action is None:
        return None
    reason = f"model: {one_line(str(item.get('reason') or action))}"
    if action != "supersede":
        return Decision(cand, action, [], reason)
    shown_ids = {m.id for m in shown}
    raw = next((item[k] for k in ("expire_ids", "expire", "ids", "supersedes") if k in item), None)
    expire = [i for i in dict.fromkeys(_ids(raw)) if i in shown_ids]
    if not expire:
        return Decision(cand, "store", [], f"{reason} (no shown memory to expire)")
    return Decision(cand, "supersede", expire, reason)


def parse_conflict_output(
    text: str,
    candidates: Sequence[MemoryCandidate],
    existing: Sequence[Sequence[StoredMemory]],
) -> list[Decision]:
    """One decision per candidate, in order, from the model's answer.

    Items are matched by their 1-based ``index`` (or by position when they carry
    none). A decision may expire only ids shown for its candidate; a supersede
    left with none becomes a store. A candidate with no usable item is decided
    by the rules. Raises :class:`ConflictOutputError` when nothing parseable is found.
    """
    try:
        value = extract_json(text)
        items = items_of(value, item_keys=("action",), list_keys=("decisions", "items"))
    except UnparseableOutputError as exc:
        raise ConflictOutputError(str(exc)) from exc
    chosen: dict[int, dict[str, Any]] = {}
    for pos, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        n = _index(item)
        i = n - 1 if n is not None else pos
        if 0 <= i < len(candidates) and i not in chosen:
            chosen[i] = item
    out: list[Decision] = []
    for i, cand in enumerate(candidates):
        item = chosen.get(i)
        decision = _model_decision(item, cand, existing[i]) if item is not None else None
        if decision is None:
            ruled = decide_by_rules(cand, existing[i])
            decision = Decision(cand, ruled.action, ruled.expire_ids, f"rules: {ruled.reason}")
        out.append(decision)
    return out
