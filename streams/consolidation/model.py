"""Consolidation's nouns: a run and its candidates, the messages it reads, the
expiries left to retry, and the jobs of ``memstream reprocess``.

A run (one per ``closed_id``) moves ``claimed`` -> ``judged`` -> ``done``
(:mod:`.pipeline`); its candidates are persisted once, when it becomes
``judged``, and then carry each step the writer recorded for them
(:mod:`.writer`). Plain values: the stores (:mod:`.ports`) read and write them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from streams.consolidation.rules.conflicts import Action
from streams.memory.model import MemoryCandidate, SourceMessage
from streams.memory.provider import Scope

Status = Literal["claimed", "judged", "done"]
EPISODE_DECIDER = "episode"  # the decider of an episode: stored as it is, never decided


@dataclass(frozen=True)
class Run:
    """One closing event's consolidation: whose, where it goes, how far it got."""

    closed_id: str
    tenant_id: str
    conversation_id: str
    user_id: str
    agent_id: str
    provider: str
    long_memory: bool
    status: Status = "claimed"
    judge: str | None = None
    message_count: int = 0
    candidate_count: int = 0
    until_id: int | None = None  # the last of the session's messages this run's claim took
    more: bool = False  # the session has messages after it: a next part follows


@dataclass(frozen=True)
class Claim:
    """What one claim took: how many messages it recorded as new, the id of the last
    of the session's messages it went through (None: none), and whether the
    session has messages after it (a next part claims them)."""

    count: int
    until_id: int | None = None
    more: bool = False


@dataclass(frozen=True)
class PlannedCandidate:
    """A candidate bound for ``cube``; episodes come pre-decided (``store``)."""

    cube: str
    candidate: MemoryCandidate
    episode: bool = False
    user_id: str | None = None  # whose memory it is; None: the run's user


@dataclass(frozen=True)
class CandidateRow:
    """A persisted candidate and the steps recorded for it: its conflict decision
    (``action``, ``expire_ids``, ``decider``), the write intent, the provider's id,
    and whether what it supersedes was expired."""

    seq: int
    cube: str
    candidate: MemoryCandidate
    action: Action | None = None
    expire_ids: tuple[str, ...] = ()
    decider: str | None = None
    write_started: bool = False
    memory_id: str | None = None
    expired: bool = False
    user_id: str | None = None  # None (rows of earlier versions): the run's user

    def owner(self, run: Run) -> str:
        return self.user_id or run.user_id


@dataclass(frozen=True)
class Origin:
    """Where a written memory came from: the run and the candidate that wrote it."""

    run: Run
    row: CandidateRow
    memory_id: str


@dataclass(frozen=True)
class Retired:
    """Memories a provider no longer holds as valid (expired or superseded)."""

    tenant_id: str
    provider: str
    memory_ids: tuple[str, ...]


@dataclass(frozen=True)
class SessionMessage:
    """A stored chat message as consolidation reads it."""

    id: int
    event_id: str
    role: str
    content: str
    created_at: datetime  # aware, UTC
    name: str | None = None
    user_id: str = ""

    def source(self, *, new: bool) -> SourceMessage:
        return SourceMessage(self.event_id, self.role, self.content, self.created_at,
                             self.name, new)


@dataclass(frozen=True)
class PendingExpiry:
    """An expiry that failed after its new memory was written, left to the sweeper."""

    closed_id: str
    seq: int
    scope: Scope
    provider: str
    cube: str
    memory_ids: list[str]
    superseded_by: str
    attempts: int


@dataclass(frozen=True)
class SummaryInput:
    """What a due summary is made from: the stored summary (if any) and the message
    id it covers up to, the newest messages (oldest first), the last of their ids
    and how many messages of the conversation lie up to it."""

    previous: str | None
    covered_until: int
    messages: list[SessionMessage]
    until: int
    total: int


SummaryStored = Literal["stored", "stale", "changed"]
"""A summary write: ``stored``; ``stale`` (a newer one covers as much); ``changed``
(messages it summarised were erased meanwhile: not stored)."""


# ------------------------------------------------------------ reprocess jobs
@dataclass(frozen=True)
class Job:
    """A ``memstream reprocess`` job of a tenant (a user of it, sessions since)."""

    job_id: str
    tenant_id: str
    user_id: str | None
    since: datetime | None  # aware
    status: str  # planned, retiring, done, abandoned
    sessions: int
    retired: int

    def describe(self) -> str:
        parts = [f"--tenant {self.tenant_id}"]
        if self.user_id is not None:
            parts.append(f"--user {self.user_id}")
        if self.since is not None:
            parts.append(f"--since {self.since.isoformat()}")
        return " ".join(parts)


class JobConflict(Exception):
    """The tenant has an unfinished job of another request."""

    def __init__(self, job: Job) -> None:
        super().__init__(f"job {job.job_id} ({job.describe()}) is unfinished for tenant "
                         f"{job.tenant_id!r}")
        self.job = job


@dataclass(frozen=True)
class JobSession:
    """A session a job rebuilds, as the run ``closed_id``."""

    closed_id: str
    conversation_id: str
    user_id: str
    agent_id: str
    seq: int
    last_at: datetime  # aware
    message_count: int
    done: bool


@dataclass(frozen=True)
class Retiring:
    """A memory a job replaces; ``text``: what it says, where an expired memory keeps
    it (the built-in provider's rows; None for a provider whose expiry deletes)."""

    provider: str
    memory_id: str
    cube: str
    user_id: str
    agent_id: str
    text: str | None = None


@dataclass(frozen=True)
class Counts:
    written: int  # memories the job stored under new ids
    kept: int  # memories it replaces that it wrote again under their own id


def session_closed_id(job_id: str, tenant_id: str, conversation_id: str, label: str) -> str:
    """The ``closed_id`` of a job's run of one session."""
    return f"{job_id}:{tenant_id}/{conversation_id}#{label}"
