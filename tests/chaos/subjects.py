"""The chaos workload's odd identities and the erasures of the disturbed phase.

Pure, like :mod:`tests.chaos.workload` which calls it: the same spec gives the
same identities and the same plan.

**Odd identities.** Ids compare exactly, so users whose ids differ only by case
(``u000`` and ``U000``), by a look-alike letter (``u000`` and ``ս000``, an
Armenian *seh*) or that are 255 characters long are different users, in the
same tenant; one agent id is 249 characters (its cube, ``agent_`` and the id,
fills the 255 of the column). Ids with surrounding spaces are refused at the
door: they are among the poison records (:mod:`tests.chaos.poison`).

**Erasures** (:class:`PlannedErasure`), each sent when a share of the workload
has been published:

* a user with odd-id twins, halfway through the stream, while their sessions
  are still coming (what comes later is covered and dropped at ingest);
* a conversation, just after its first session end;
* one episode, by its memory id once it exists;
* a group-chat speaker just before the session end they send (the end in flight);
* a group-chat speaker while the run of the session the other speaker ended is
  in flight (aimed: sent once that run is seen unfinished in the database).

An erased conversation or user is *quiet* in the workload (no system prompt,
lesson or tool call): every memory judged from it is its user's own, so the
disturbed phase must hold the undisturbed phase's memories minus exactly those
judged from erased messages, and minus the erased episode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

LONG_AGENT_LEN = 249  # the longest agent id: its cube name fills a 255-character column
ID_MAX = 255


def odd_users(users: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``users`` (tenant, id) with three renamed: a case twin and a look-alike twin of
    the first user, in its tenant, and one 255-character id."""
    out = list(users)
    tenant, first = out[0]
    twins = [first.upper(), "\u057d" + first[1:], (first + "-" + "x" * ID_MAX)[:ID_MAX]]
    slots = [i for i, (t, _) in enumerate(out) if t == tenant and i > 0][:len(twins)]
    for i, new in zip(slots, twins, strict=False):
        out[i] = (tenant, new)
    return out


def long_agent(name: str) -> str:
    return (name + "-" + "y" * LONG_AGENT_LEN)[:LONG_AGENT_LEN]


@dataclass(frozen=True)
class PlannedErasure:
    name: str
    tenant: str
    target: Literal["user", "conversation", "memory"]
    subject: str  # the user or the conversation; for a memory, the event whose episode goes
    at: float  # share of the workload published when it is sent
    aim: str | None = None  # a closed_id: sent once its run is seen in flight (bounded wait)
    events: frozenset[str] = frozenset()  # the messages it erases (none for a memory)

    def describe(self) -> str:
        aim = f", aimed at {self.aim}" if self.aim else ""
        return f"erase {self.target} {self.subject!r} ({self.name}) at {self.at:.0%}{aim}"


@dataclass(frozen=True)
class Said:
    """A message, as the plan needs it."""

    tenant: str
    conversation: str
    user: str
    event_id: str
    role: str
    session: int


def plan_erasures(total: int, position: Mapping[str, int], said: Sequence[Said],
                  erased_user: tuple[str, str], conversation: tuple[str, str],
                  groups: Sequence[tuple[str, str, tuple[str, ...], int]]) -> list[PlannedErasure]:
    """The erasures of the disturbed phase. ``position``: every event's index in the
    stream (session ends as ``{conversation}-end-{seq}``); ``groups``: (tenant,
    conversation, speakers, sessions) of the group chats, the first ended by its
    first speaker, the second by its second."""
    def of_user(tenant: str, user: str) -> frozenset[str]:
        return frozenset(m.event_id for m in said if m.tenant == tenant and m.user == user)

    def share(pos: int) -> float:
        return round(min(max(pos, 0), total - 1) / total, 5)

    tenant, user = erased_user
    out = [PlannedErasure("a user with odd-id twins", tenant, "user", user, 0.5,
                          events=of_user(tenant, user))]
    ct, cid = conversation
    out.append(PlannedErasure("a conversation after its first session", ct, "conversation", cid,
                              share(position[f"{cid}-end-1"] + 10),
                              events=frozenset(m.event_id for m in said
                                               if m.tenant == ct and m.conversation == cid)))
    taken = {user, *(s for g in groups for s in g[2])}
    episode = next(m for m in said if m.role == "user" and m.session == 1
                   and m.user not in taken and m.conversation != cid
                   and position[f"{m.conversation}-end-1"] < 0.3 * total)
    out.append(PlannedErasure("one episode", episode.tenant, "memory", episode.event_id, 0.45))
    for i, (gt, gid, speakers, sessions) in enumerate(groups[:2]):
        end = position[f"{gid}-end-{sessions}"]
        victim = speakers[0]
        if i == 0:
            out.append(PlannedErasure("a group-chat speaker whose session end is in flight",
                                      gt, "user", victim, share(end - 1),
                                      events=of_user(gt, victim)))
        else:
            out.append(PlannedErasure("a group-chat speaker while the other's run is in flight",
                                      gt, "user", victim, share(end),
                                      aim=f"{gt}/{gid}#{sessions}", events=of_user(gt, victim)))
    return out
