"""The chaos workload: a deterministic stream of chat events and what it must produce.

:func:`build_workload` turns a :class:`~tests.chaos.config.WorkloadSpec` into
the records to publish, in order, and everything the checks need to know
about them: the good messages in produce order, every session with exactly its
messages, and the poison records (:mod:`tests.chaos.poison`). Pure: no
Kafka, no clock, no I/O; the same spec gives the same bytes.

Shape: users of a few tenants, each with one or more conversations; each
conversation has one to three sessions, each ended by an explicit
``session_end``; about ``active`` conversations are in progress at any point,
so sessions of one user overlap in time. Facts, corrections in later sessions,
lessons, small talk, system prompts and tool calls come from
:mod:`tests.chaos.vocabulary`. Linked pairs are two conversations of one user
whose first sessions run in lockstep and state the same fact, their session
ends next to each other: two consolidations at the same moment that must end
as one memory.

Returning conversations have their last session at the very end of the stream
(from ``late_from``): by then their state has left the sessions table, and the
disturbed phase holds them back until partitions moved away and came back.

Event times are the base time plus the record's position in seconds: they grow
within every conversation and differ between any two events.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.chaos import vocabulary as V
from tests.chaos.config import WorkloadSpec
from tests.chaos.poison import Poison, poison_records
from tests.chaos.subjects import PlannedErasure, Said, long_agent, odd_users, plan_erasures

BASE_TIME = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
_TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark")
_AGENTS = ("travel-planner", "chef", "coach", "tutor", "concierge")
LONG_GROUP_SESSION = 120  # turns of small talk more in the aimed group chat's last session


@dataclass(frozen=True)
class Conversation:
    tenant: str
    user: str
    agent: str
    id: str
    speakers: tuple[str, ...] = ()  # a group chat's users; () for one user's conversation


@dataclass(frozen=True)
class Record:
    """One record to publish; ``topic`` is a role (chat, idle, closed, retry, subagent)."""

    topic: str
    key: bytes | None
    value: bytes


@dataclass(frozen=True)
class Message:
    """A good chat message, as stored: the checks find it by ``(tenant, event_id)``."""

    conversation: Conversation
    event_id: str
    role: str
    content: str
    session: int
    position: int = 0  # index in the published stream
    user: str = ""  # who said it, or was answered (the conversation's user unless a group chat)


@dataclass(frozen=True)
class Session:
    conversation: Conversation
    seq: int
    event_ids: tuple[str, ...]  # its messages, in order

    @property
    def closed_id(self) -> str:
        return f"{self.conversation.tenant}/{self.conversation.id}#{self.seq}"


@dataclass(frozen=True)
class _Event:
    conversation: Conversation
    event_id: str
    session: int
    role: str = ""  # "" for a session end
    content: str = ""
    tool_calls: tuple[tuple[str, str], ...] = ()  # (call id, function name)
    tool_call_id: str | None = None
    user: str = ""  # the speaker (or the one answered) when not the conversation's user


@dataclass
class Workload:
    spec: WorkloadSpec
    records: list[Record]
    messages: list[Message]
    sessions: list[Session]
    poison: list[Poison]
    conversations: list[Conversation]
    linked: list[tuple[Conversation, Conversation]] = field(default_factory=list)
    erasures: list[PlannedErasure] = field(default_factory=list)
    late_from: int = 0  # index of the first record of the returning conversations' last sessions

    def by_conversation(self) -> dict[tuple[str, str], list[str]]:
        """(tenant, conversation) -> its good messages' event ids in produce order."""
        out: dict[tuple[str, str], list[str]] = {}
        for m in self.messages:
            out.setdefault((m.conversation.tenant, m.conversation.id), []).append(m.event_id)
        return out


class _Planner:
    """One conversation's sessions, as lists of events ending with the session end."""

    def __init__(self, rng: random.Random, spec: WorkloadSpec) -> None:
        self.rng = rng
        self.spec = spec

    def sessions(self, conv: Conversation, name: str | None,
                 facts: Sequence[tuple[V.Slot, str, str | None]],
                 linked_fact: str | None, quiet: bool = False) -> list[list[_Event]]:
        """``name``: the user's name, said in the first session (or not, when None);
        ``quiet``: no system prompt, lesson or tool call (all its memories are its
        user's: an erasure of it takes nothing another conversation also said)."""
        rng = self.rng
        lo = 0 if linked_fact is None else 1  # a linked first session says nothing else
        count = rng.randint(lo + 1, max(self.spec.max_sessions, lo + 1))
        said: list[list[str]] = [[] for _ in range(count)]
        if linked_fact is not None:
            said[0].append(linked_fact)
        elif name is not None:
            said[0].append(V.NAME.say(name))
        for slot, first, second in facts:
            at = lo + (rng.randrange(count - lo - 1) if count - lo > 1 else 0)
            said[at].append(slot.say(first))
            if second is not None and at + 1 < count and rng.random() < 0.75:
                said[rng.randrange(at + 1, count)].append(slot.correct(second))
        numbers = itertools.count(1)
        return [self._session(conv, seq, sentences, linked_fact is not None and seq == 1,
                              numbers, quiet) for seq, sentences in enumerate(said, start=1)]

    def group_sessions(self, conv: Conversation, sessions: int, ender: str,
                       long_last: int = 0) -> list[list[_Event]]:
        """A group chat: its speakers take turns, each states facts of their own (a slot
        each per session), the assistant answers whoever spoke (the reply carries that
        user's id); every session end is sent by ``ender``. ``long_last``: more small
        talk in the last session (its consolidation takes longer: an erasure can be
        aimed at it in flight)."""
        rng = self.rng
        pools = {u: rng.sample(V.SLOTS, len(V.SLOTS)) for u in conv.speakers}
        numbers = itertools.count(1)
        out: list[list[_Event]] = []
        for seq in range(1, sessions + 1):
            lines = [(u, self._fact(pools[u])) for u in conv.speakers]
            more = 2 + (long_last if seq == sessions else 0)
            lines += [(rng.choice(conv.speakers), rng.choice(V.SMALL_TALK)) for _ in range(more)]
            rng.shuffle(lines)
            events: list[_Event] = []
            for user, line in lines:
                events.append(_Event(conv, f"{conv.id}-{next(numbers)}", seq, "user", line,
                                     user=user))
                events.append(_Event(conv, f"{conv.id}-{next(numbers)}", seq, "assistant",
                                     rng.choice(V.REPLIES), user=user))
            events.append(_Event(conv, f"{conv.id}-end-{seq}", seq, user=ender))
            out.append(events)
        return out

    def _fact(self, pool: list[V.Slot]) -> str:
        slot = pool.pop()
        return slot.say(self.rng.choice(slot.values))

    def _session(self, conv: Conversation, seq: int, sentences: Sequence[str], fixed: bool,
                 numbers: Iterator[int], quiet: bool = False) -> list[_Event]:
        """One session: the user says ``sentences`` among small talk, the assistant
        answers (now and then with a lesson or a tool call). A ``fixed`` session has
        one shape only, so two of them run in lockstep."""
        rng = self.rng
        events: list[_Event] = []

        def add(role: str, content: str, **kw: Any) -> str:
            event_id = f"{conv.id}-{next(numbers)}"
            events.append(_Event(conv, event_id, seq, role, content, **kw))
            return event_id

        plain = fixed or quiet
        if seq == 1 and not plain and rng.random() < 0.3:
            add("system", V.SYSTEM_PROMPT)
        turns = 2 if fixed else max(len(sentences), rng.randint(2, self.spec.max_turns))
        user_lines = list(sentences) + [rng.choice(V.SMALL_TALK)
                                        for _ in range(turns - len(sentences))]
        rng.shuffle(user_lines)
        for line in user_lines:
            said = add("user", line)
            if not plain and rng.random() < 0.1:
                call = f"call-{said}"
                add("assistant", "", tool_calls=((call, V.TOOL_NAME),))
                add("tool", V.TOOL_RESULT, tool_call_id=call)
            lesson = not plain and rng.random() < 0.12
            add("assistant", rng.choice(V.LESSONS) if lesson else rng.choice(V.REPLIES))
        events.append(_Event(conv, f"{conv.id}-end-{seq}", seq))
        return events


Step = tuple[_Event, ...]  # events that go out next to each other


def _merge(rng: random.Random, units: list[list[Step]], active: int) -> list[_Event]:
    """Interleave the units: ``active`` of them in progress, each kept in order."""
    waiting = list(units)
    rng.shuffle(waiting)
    running: list[list[Step]] = []
    positions: list[int] = []
    out: list[_Event] = []
    while waiting or running:
        while waiting and len(running) < active:
            running.append(waiting.pop())
            positions.append(0)
        i = rng.randrange(len(running))
        out.extend(running[i][positions[i]])
        positions[i] += 1
        if positions[i] == len(running[i]):
            running.pop(i)
            positions.pop(i)
    return out


def _interleave(rng: random.Random, a: list[_Event], b: list[_Event]) -> list[_Event]:
    """A random merge of two sequences, each kept in order."""
    out, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        if j == len(b) or (i < len(a) and rng.random() < 0.5):
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return out


def _lockstep(first: list[_Event], second: list[_Event]) -> list[Step]:
    """Two sessions message by message, their session ends in one step."""
    out: list[Step] = [(e,) for pair in zip(first[:-1], second[:-1], strict=True) for e in pair]
    return [*out, (first[-1], second[-1])]


def _chat_doc(e: _Event, at: datetime) -> dict[str, Any]:
    c = e.conversation
    doc: dict[str, Any] = {
        "event_id": e.event_id, "type": "message" if e.role else "session_end",
        "tenant_id": c.tenant, "user_id": e.user or c.user, "agent_id": c.agent,
        "conversation_id": c.id, "created_at": at.isoformat().replace("+00:00", "Z"),
    }
    if not e.role:
        doc["reason"] = "user_left"
        return doc
    doc.update(role=e.role, content=e.content)
    if e.tool_calls:
        doc["tool_calls"] = [{"id": cid, "type": "function",
                              "function": {"name": fn, "arguments": "{}"}}
                             for cid, fn in e.tool_calls]
    if e.tool_call_id:
        doc["tool_call_id"] = e.tool_call_id
    return doc


def build_workload(spec: WorkloadSpec) -> Workload:
    rng = random.Random(spec.seed)
    tenants = [_TENANTS[i] if i < len(_TENANTS) else f"tenant{i}" for i in range(spec.tenants)]
    agents = {t: [_AGENTS[k % len(_AGENTS)] + ("" if k < len(_AGENTS) else str(k))
                  for k in range(spec.agents_per_tenant)] for t in tenants}
    users = [(tenants[j % len(tenants)], f"u{j:03d}") for j in range(spec.users)]
    if spec.odd_ids:
        users = odd_users(users)
        agents[tenants[-1]][0] = long_agent(agents[tenants[-1]][0])
    owner = list(range(spec.users)) + [rng.randrange(spec.users)
                                       for _ in range(spec.conversations - spec.users)]
    conversations = [Conversation(users[u][0], users[u][1], rng.choice(agents[users[u][0]]),
                                  f"c{i:04d}") for i, u in enumerate(owner[:spec.conversations])]
    mine: dict[str, list[Conversation]] = {}
    for c in conversations:
        mine.setdefault(c.user, []).append(c)

    facts: dict[str, list[tuple[V.Slot, str, str | None]]] = {}
    names: dict[str, str] = {}
    linked_fact: dict[str, str] = {}
    linked: list[tuple[Conversation, Conversation]] = []
    for user, convs in mine.items():
        names[user] = rng.choice(V.NAME.values)
        pool = list(V.SLOTS)
        rng.shuffle(pool)
        for c in convs:
            facts[c.id] = []
            for _ in range(rng.randint(1, 2)):
                if not pool:
                    break
                slot = pool.pop()
                first, second = rng.sample(slot.values, 2)
                facts[c.id].append((slot, first, first if slot.same_value_corrected else second))
    several = [u for u, convs in mine.items() if len(convs) >= 2]
    for user in rng.sample(several, min(spec.linked_pairs, len(several))):
        pair = rng.sample(mine[user], 2)
        sentence = V.EMPLOYER.say(rng.choice(V.EMPLOYER.values))
        for c in pair:
            linked_fact[c.id] = sentence
        linked.append((pair[0], pair[1]))

    # erased in the disturbed phase: the first user (with odd-id twins) and one
    # conversation of another user, not linked, in which their name is not said
    erased_user = users[0]
    target = next((c for c in conversations if c.user != erased_user[1]
                   and c.id not in linked_fact), conversations[-1])
    quiet = ({c.id for c in conversations if (c.tenant, c.user) == erased_user} | {target.id}
             if spec.erasures else set())

    # the name is said in up to two conversations of a user: a search for it then
    # meets at most two copies of the fact and their episodes, well inside top_k
    named: set[str] = set()
    for convs in mine.values():
        free = [c.id for c in convs if c.id not in linked_fact and c.id != target.id]
        named.update(rng.sample(free, min(2, len(free), rng.randint(0, 2))))
    planner = _Planner(rng, spec)
    planned = {c.id: planner.sessions(c, names[c.user] if c.id in named else None, facts[c.id],
                                      linked_fact.get(c.id), c.id in quiet)
               for c in conversations}
    at = [tenants[i % len(tenants)] for i in range(spec.group_chats)]
    groups = [Conversation(t, f"g{i}a", agents[t][0], f"g{i:03d}", (f"g{i}a", f"g{i}b"))
              for i, t in enumerate(at)]
    for i, g in enumerate(groups):  # the second's last run is aimed at (tests.chaos.subjects)
        planned[g.id] = planner.group_sessions(g, 2, g.speakers[i % 2],
                                               LONG_GROUP_SESSION if i == 1 else 0)
    conversations = conversations + groups
    units: list[list[Step]] = []
    in_pair = {c.id for pair in linked for c in pair}
    for a, b in linked:
        sa, sb = planned[a.id], planned[b.id]
        rest = _interleave(rng, [e for s in sa[1:] for e in s], [e for s in sb[1:] for e in s])
        units.append(_lockstep(sa[0], sb[0]) + [(e,) for e in rest])
    # returning conversations: their last session comes at the end of the stream, after
    # their state left the sessions table (and, in the disturbed phase, after their
    # partition moved away and came back)
    returning = [c.id for c in conversations if c.id not in in_pair and c.id not in quiet
                 and not c.speakers and len(planned[c.id]) >= 2][:spec.returning]
    units += [[(e,) for s in planned[c.id][:-1 if c.id in returning else None] for e in s]
              for c in conversations if c.id not in in_pair]
    stream = _merge(rng, units, spec.active)
    late = _merge(rng, [[(e,) for e in planned[c][-1]] for c in returning], spec.active)
    stream += late

    poison = poison_records(rng, [e.conversation for e in stream], spec.poison)
    at_position = {p.position: p for p in poison}
    records: list[Record] = []
    messages: list[Message] = []
    session_ids: dict[tuple[str, int], list[str]] = {}
    position: dict[str, int] = {}
    events = iter(stream)
    late_from = len(stream) + len(poison)
    first_late = late[0].event_id if late else None
    for pos in range(len(stream) + len(poison)):
        when = BASE_TIME + timedelta(seconds=pos)
        if (p := at_position.get(pos)) is not None:
            records.append(Record(p.topic, p.key, p.value))
            continue
        e = next(events)
        c = e.conversation
        position[e.event_id] = pos
        if e.event_id == first_late:
            late_from = pos
        records.append(Record("chat", c.id.encode(),
                              json.dumps(_chat_doc(e, when), separators=(",", ":")).encode()))
        if e.role:
            messages.append(Message(c, e.event_id, e.role, e.content, e.session, pos,
                                    e.user or c.user))
            session_ids.setdefault((c.id, e.session), []).append(e.event_id)
    sessions = [Session(c, s, tuple(session_ids[(c.id, s)]))
                for c in conversations for s in range(1, len(planned[c.id]) + 1)]
    erasures = plan_erasures(
        len(records), position,
        [Said(m.conversation.tenant, m.conversation.id, m.user, m.event_id, m.role, m.session)
         for m in messages], erased_user, (target.tenant, target.id),
        [(g.tenant, g.id, g.speakers, len(planned[g.id])) for g in groups],
    ) if spec.erasures else []
    return Workload(spec, records, messages, sessions, poison, conversations, linked, erasures,
                    late_from)
