"""Scoring BEAM replies by their evidence turns (pure).

A BEAM turn's event id is ``beam-<chat_id>:<turn id>``; a memory *represents*
a turn when the turn's event id is among its source events (a long turn may
be represented by several memories). Per question with evidence:

* **in 4k** (b4k) — the share of its evidence turns represented among the
  memories inside the long-memory token budget (what reaches the model);
* **all** — 1 when every evidence turn is inside the budget, else 0;
* **R@k** (5, 10, 20) — the share represented among the first k memories listed.

A question without evidence ids (``abstention``, by design) is asked and
timed but not scored. **Knowledge-update order**: for a ``knowledge_update``
question whose original and updated turns are both named and disjoint (a
question naming one turn as both is skipped and counted), the update is
*above* the original when some updated turn is inside the budget and its best
rank among the listed memories (the rank of the first memory representing it)
is better than the original's best rank (an original not listed ranks below
everything). **Cross-user**: a memory is *in a reply* when it is among the
first ten listed or inside the budget; its owners are the chats of its source
events (none when it has no source events); its share is the part of the
replies to users of other chats that hold it. A memory that was inside a
budget but never listed has no known sources: it is counted apart, not shared.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from streams.devtools.beam.dataset import QUESTION_TYPES, Question
from streams.devtools.evidence import share_found
from streams.devtools.locomo.scoring import percentile

KS = (5, 10, 20)
IN_REPLY_LISTED = 10  # the first memories listed that count as "in the reply"
CROSS_USER_LIMIT = 0.05
OFFENDERS = 5
CONTENT_CHARS = 80
_EVENT = re.compile(r"beam-(.+):(\d+)")


def event_id(chat_id: str, turn_id: int) -> str:
    return f"beam-{chat_id}:{turn_id}"


def chat_of(source_event_id: str) -> str | None:
    """The chat a BEAM turn's event id belongs to; None for any other id."""
    m = _EVENT.fullmatch(source_event_id)
    return m.group(1) if m else None


@dataclass(frozen=True)
class Memory:
    """A memory as a reply lists it."""

    id: str
    cube: str = ""
    content: str = ""
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reply:
    """What scoring needs of a reply: the memories listed (best first) and the budget."""

    memories: tuple[Memory, ...] = ()
    budget_ids: tuple[str, ...] = ()
    budget_sources: tuple[str, ...] = ()
    tokens_used: int = 0


@dataclass(frozen=True)
class Asked:
    """A question as asked: its reply (None when none came) and its latency."""

    question: Question
    reply: Reply | None
    latency_ms: float
    number: int = 0  # its place among its chat's questions, 1-based


@dataclass(frozen=True)
class KuOrder:
    skipped: bool = False  # original and updated name one turn
    above: bool = False
    both_listed: bool = False


@dataclass(frozen=True)
class QuestionScore:
    chat_id: str
    type: str
    has_evidence: bool
    b4k: float
    all_in: float
    recall: dict[int, float]
    ku: KuOrder | None = None


def best_rank(turns: Iterable[str], memories: Sequence[Memory]) -> int | None:
    """The 1-based rank of the first listed memory representing any of ``turns``."""
    wanted = set(turns)
    return next((i for i, m in enumerate(memories, 1) if wanted.intersection(m.sources)), None)


def ku_order(q: Question, reply: Reply) -> KuOrder | None:
    """The knowledge-update order of ``q``; None when it has no original or no update."""
    if q.type != "knowledge_update" or not q.original or not q.updated:
        return None
    if set(q.original) & set(q.updated):
        return KuOrder(skipped=True)
    original = best_rank((event_id(q.chat_id, t) for t in q.original), reply.memories)
    budget = set(reply.budget_sources)
    above = False
    for turn in q.updated:
        ev = event_id(q.chat_id, turn)
        rank = best_rank([ev], reply.memories)
        if ev in budget and rank is not None and (original is None or rank < original):
            above = True
    updated = best_rank((event_id(q.chat_id, t) for t in q.updated), reply.memories)
    return KuOrder(above=above, both_listed=original is not None and updated is not None)


def score(q: Question, reply: Reply) -> QuestionScore:
    ev = [event_id(q.chat_id, t) for t in q.evidence]
    recall = {k: share_found(ev, (s for m in reply.memories[:k] for s in m.sources))
              for k in KS}
    budget = set(reply.budget_sources)
    all_in = 1.0 if ev and all(e in budget for e in ev) else 0.0
    return QuestionScore(q.chat_id, q.type, bool(ev), share_found(ev, budget), all_in, recall,
                         ku_order(q, reply))


@dataclass(frozen=True)
class Row:
    questions: int
    b4k: float
    all_in: float
    recall: dict[int, float]

    def as_json(self) -> dict[str, float]:
        return {"questions": self.questions, "b4k": round(self.b4k, 4),
                "all": round(self.all_in, 4),
                **{f"recall_at_{k}": round(self.recall[k], 4) for k in KS}}


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def row(scores: Sequence[QuestionScore]) -> Row:
    return Row(len(scores), _mean([s.b4k for s in scores]), _mean([s.all_in for s in scores]),
               {k: _mean([s.recall[k] for s in scores]) for k in KS})


@dataclass(frozen=True)
class KuSummary:
    questions: int = 0  # measured: both named and disjoint
    above: int = 0
    both_listed: int = 0
    above_both_listed: int = 0
    skipped: int = 0

    def as_json(self) -> dict[str, float]:
        return {"questions": self.questions, "above": self.above,
                "share_above": round(self.above / self.questions, 4) if self.questions else 0.0,
                "both_listed": self.both_listed,
                "share_above_both_listed": (round(self.above_both_listed / self.both_listed, 4)
                                            if self.both_listed else 0.0),
                "skipped": self.skipped}


def ku_summary(scores: Sequence[QuestionScore]) -> KuSummary:
    orders = [s.ku for s in scores if s.ku is not None]
    measured = [o for o in orders if not o.skipped]
    return KuSummary(len(measured), sum(o.above for o in measured),
                     sum(o.both_listed for o in measured),
                     sum(o.above and o.both_listed for o in measured),
                     sum(o.skipped for o in orders))


@dataclass(frozen=True)
class Offender:
    memory_id: str
    cube: str
    share: float
    content: str  # the first 80 characters
    owners: tuple[str, ...]


@dataclass(frozen=True)
class CrossUser:
    replies: int = 0
    memories: int = 0  # memories in some reply whose sources are known
    max_share: float = 0.0
    above_limit: int = 0  # memories in more than CROSS_USER_LIMIT of other users' replies
    offenders: tuple[Offender, ...] = ()
    unknown_sources: int = 0  # inside a budget, never listed
    by_cube: dict[str, int] = field(default_factory=dict)  # the memories in replies, per cube

    def as_json(self) -> dict[str, object]:
        return {"replies": self.replies, "memories": self.memories,
                "max_share": round(self.max_share, 4), "limit": CROSS_USER_LIMIT,
                "above_limit": self.above_limit, "unknown_sources": self.unknown_sources,
                "by_cube": self.by_cube,
                "offenders": [{"memory_id": o.memory_id, "cube": o.cube,
                               "share": round(o.share, 4), "content": o.content,
                               "owners": list(o.owners)} for o in self.offenders]}


def in_reply(reply: Reply) -> set[str]:
    """The ids of the memories in a reply: the first ten listed and those inside the budget."""
    return {m.id for m in reply.memories[:IN_REPLY_LISTED]} | set(reply.budget_ids)


def cross_user(asked: Sequence[Asked]) -> CrossUser:
    answered = [(a.question.chat_id, a.reply) for a in asked if a.reply is not None]
    known: dict[str, Memory] = {}
    for _, reply in answered:
        for m in reply.memories:
            known.setdefault(m.id, m)
    holding = [(chat, in_reply(reply)) for chat, reply in answered]
    seen = set().union(*(ids for _, ids in holding))
    offenders: list[Offender] = []
    for mid in sorted(seen & known.keys()):
        m = known[mid]
        owners = tuple(sorted({c for s in m.sources if (c := chat_of(s)) is not None}))
        others = [ids for chat, ids in holding if chat not in owners]
        share = sum(1 for ids in others if mid in ids) / len(others) if others else 0.0
        offenders.append(Offender(mid, m.cube, share, m.content[:CONTENT_CHARS], owners))
    offenders.sort(key=lambda o: (-o.share, o.memory_id))
    return CrossUser(
        replies=len(answered), memories=len(offenders),
        max_share=offenders[0].share if offenders else 0.0,
        above_limit=sum(1 for o in offenders if o.share > CROSS_USER_LIMIT),
        offenders=tuple(o for o in offenders[:OFFENDERS] if o.share > 0),
        unknown_sources=len(seen - known.keys()),
        by_cube=dict(Counter(o.cube for o in offenders).most_common()))


@dataclass
class BeamSummary:
    asked: int
    unanswered: int
    unscored: int
    overall: Row
    by_type: dict[str, Row] = field(default_factory=dict)
    ku: KuSummary = KuSummary()
    tokens_mean: float = 0.0
    tokens_median: float = 0.0
    tokens_max: int = 0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    cross: CrossUser = CrossUser()
    scores: list[tuple[Asked, QuestionScore]] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            **{k: v for k, v in self.overall.as_json().items() if k != "questions"},
            "questions": self.overall.questions,
            "asked": self.asked, "unanswered": self.unanswered, "unscored": self.unscored,
            "by_type": {t: r.as_json() for t, r in self.by_type.items()},
            "knowledge_update": self.ku.as_json(),
            "tokens_used": {"mean": round(self.tokens_mean, 1),
                            "median": round(self.tokens_median, 1), "max": self.tokens_max},
            "p50_ms": round(self.p50_ms, 2), "p95_ms": round(self.p95_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
            "cross_user": self.cross.as_json(),
            "per_question": [
                {"chat": a.question.chat_id, "n": a.number, "type": a.question.type,
                 "answered": a.reply is not None, "scored": s.has_evidence,
                 "b4k": round(s.b4k, 4), "all": s.all_in,
                 "recall_at_10": round(s.recall[10], 4),
                 "ku_above": None if s.ku is None or s.ku.skipped else s.ku.above,
                 "tokens_used": a.reply.tokens_used if a.reply else None,
                 "latency_ms": round(a.latency_ms, 2) if a.reply else None}
                for a, s in self.scores],
        }


def summarize(asked: Sequence[Asked]) -> BeamSummary:
    """Evidence figures over the answered questions with evidence; tokens, latency and
    the cross-user check over every answered question."""
    pairs = [(a, score(a.question, a.reply or Reply())) for a in asked]
    answered = [(a, s) for a, s in pairs if a.reply is not None]
    scored = [s for _, s in answered if s.has_evidence]
    tokens = [float(a.reply.tokens_used) for a, _ in answered if a.reply is not None]
    lat = [a.latency_ms for a, _ in answered]
    types = [t for t in QUESTION_TYPES if any(s.type == t for s in scored)]
    types += sorted({s.type for s in scored} - set(types))
    return BeamSummary(
        asked=len(asked), unanswered=len(asked) - len(answered),
        unscored=sum(1 for _, s in answered if not s.has_evidence),
        overall=row(scored),
        by_type={t: row([s for s in scored if s.type == t]) for t in types},
        ku=ku_summary([s for _, s in answered]),
        tokens_mean=_mean(tokens), tokens_median=percentile(tokens, 50),
        tokens_max=int(max(tokens, default=0)),
        p50_ms=percentile(lat, 50), p95_ms=percentile(lat, 95), p99_ms=percentile(lat, 99),
        cross=cross_user(asked), scores=pairs)


def render_table(s: BeamSummary, *, budget: int | None = None, arrivals: str = "") -> str:
    head = f"{'type':<26} {'questions':>9} {'in 4k':>7} {'all':>7} {'R@10':>7}"
    rows = [head, "-" * len(head)]
    for name, r in s.by_type.items():
        rows.append(f"{name:<26} {r.questions:>9} {r.b4k:>7.1%} {r.all_in:>7.1%} "
                    f"{r.recall[10]:>7.1%}")
    rows.append("-" * len(head))
    o = s.overall
    rows.append(f"{'overall':<26} {o.questions:>9} {o.b4k:>7.1%} {o.all_in:>7.1%} "
                f"{o.recall[10]:>7.1%}")
    rows.append(f"R@5 {o.recall[5]:.1%}, R@20 {o.recall[20]:.1%}")
    if s.unscored:
        kinds = Counter(a.question.type for a, q in s.scores
                        if a.reply is not None and not q.has_evidence)
        rows.append(f"{s.unscored} question(s) without evidence ids ("
                    + ", ".join(f"{t} {n}" for t, n in kinds.most_common())
                    + "): asked, not scored")
    if s.unanswered:
        rows.append(f"{s.unanswered} question(s) got no reply: not scored, not timed")
    k = s.ku
    line = (f"knowledge update: updated above original in {k.above}/{k.questions}"
            f" ({k.above / k.questions:.1%})" if k.questions else
            "knowledge update: no question measured")
    if k.questions:
        line += (f"; where both are listed {k.above_both_listed}/{k.both_listed}"
                 + (f" ({k.above_both_listed / k.both_listed:.1%})" if k.both_listed else ""))
    if k.skipped:
        line += f"; {k.skipped} skipped (one turn named as both)"
    rows.append(line)
    rows.append(f"tokens used{f' (budget {budget})' if budget else ''}: mean "
                f"{s.tokens_mean:.0f}, median {s.tokens_median:.0f}, max {s.tokens_max}")
    rows.append(f"query latency{f' ({arrivals})' if arrivals else ''}: p50 {s.p50_ms:.1f} ms, "
                f"p95 {s.p95_ms:.1f} ms, p99 {s.p99_ms:.1f} ms")
    c = s.cross
    cubes = ", ".join(f"{cube} {n}" for cube, n in c.by_cube.items())
    rows.append(f"cross-user: largest share of other users' replies holding one memory "
                f"{c.max_share:.1%}; {c.above_limit} of {c.memories} memories above "
                f"{CROSS_USER_LIMIT:.0%} ({c.replies} replies"
                + (f"; by cube: {cubes}" if cubes else "")
                + (f"; {c.unknown_sources} inside a budget, never listed: sources unknown"
                   if c.unknown_sources else "") + ")")
    for off in c.offenders:
        text = off.content.replace("\n", " ")
        rows.append(f"  {off.share:>6.1%}  {off.memory_id}  {off.cube}  "
                    f"[{', '.join(off.owners) or 'no chat'}]  {text}")
    return "\n".join(rows)
