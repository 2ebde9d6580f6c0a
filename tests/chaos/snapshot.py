"""What a chaos phase left behind, as read from the outside (see :mod:`.observe`).

Plain data, so the checks (:mod:`.checks`) are pure and tested without services.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StoredMessage:
    id: int
    tenant: str
    event_id: str
    conversation: str


@dataclass(frozen=True)
class MemoryRow:
    """A valid memory (``valid_to`` unset) of the built-in provider."""

    tenant: str
    cube: str
    owner: str  # the user of a user_profile cube, "" for an agent cube
    kind: str
    type: str
    content: str
    source_event_ids: tuple[str, ...]
    id: str = ""


@dataclass(frozen=True)
class DeadLetter:
    value: bytes
    stage: str
    reason: str
    source_topic: str


@dataclass(frozen=True)
class Lag:
    group: str
    topic: str
    partition: int
    committed: int  # 0 when the group committed nothing there
    end: int


@dataclass(frozen=True)
class DeadlineTally:
    """What one class of deadline callers got (``tests.chaos.traffic.DeadlineCallers``)."""

    name: str
    deadline_s: float
    late_allowed: float  # share of those asked while a worker was live that may come late
    asked: int
    late: int  # no reply within the deadline, asked while a worker was live
    late_at: list[float]  # when each of those was asked, seconds into the phase
    outage_asked: int  # asked while no worker was live (or within the deadline before)
    outage_late: int  # ... of which not answered in time: nothing could answer them
    rebalance_asked: int  # asked while the query group was rebalancing (or just before)
    rebalance_late: int  # ... of which not answered in time
    slowest_s: float  # of those answered
    hedges_sent: int
    hedges_won: int
    duplicates_dropped: int  # second replies the client did not pass on
    slowest: list[tuple[float, float]] = field(default_factory=list)
    """the three slowest answered: (latency s, asked at s into the phase)"""
    late_where: list[str] = field(default_factory=list)
    """each late one: when, the query partition its first copy went to, hedged or not"""

    @property
    def too_late(self) -> bool:
        return self.late > self.late_allowed * (self.asked - self.outage_asked)


@dataclass
class Snapshot:
    messages: list[StoredMessage] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)  # closed_id -> status
    ledger: dict[str, list[str]] = field(default_factory=dict)  # closed_id -> event ids
    memories: list[MemoryRow] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    queries_sent: list[bytes] = field(default_factory=list)  # correlation ids
    replies: list[bytes] = field(default_factory=list)  # correlation id of each reply
    reply_errors: list[str] = field(default_factory=list)  # error codes of replies
    deadline: list[DeadlineTally] = field(default_factory=list)
    redis_lists: dict[str, list[str]] = field(default_factory=dict)  # "tenant:conv" -> ids
    lag: list[Lag] = field(default_factory=list)
    uncovered: list[tuple[str, int, int]] = field(default_factory=list)  # topic, partition, end
    erasures: list[tuple[str, str]] = field(default_factory=list)  # (what, receipt status)
    erased_memories: list[MemoryRow] = field(default_factory=list)  # erased one by one
    after_erasure: dict[str, list[str]] = field(default_factory=dict)
    """who asked once the phase settled (erased users, group-chat speakers) -> the source
    events of the memories their replies gave (and ``error:<code>`` per failed reply)"""
    leftovers: dict[str, int] = field(default_factory=dict)  # "table (subject)" -> rows
    rejoins: int | None = None
    """rebalances the live workers asked for because records were passed over
    (``memstream_group_rejoins_total``); None: not read"""
    held_back: int | None = None
    """the paced tenant's events the live workers held back over its quota of events
    (``memstream_quota_decisions_total{decision="delayed"}``); None: not read"""
