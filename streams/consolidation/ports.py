"""What consolidation needs from the world, one Protocol each.

The database adapters implement them (``streams.adapters.db``: ``LedgerStore``
and ``ReprocessClaims`` the :class:`Ledger`, ``RunStore`` the :class:`Runs`,
``ExpiryStore`` the :class:`Expiries`, ``SummaryRows`` the :class:`Summaries`,
``ReprocessStore`` the :class:`ReprocessJobs`, ``EpisodeRows`` the
:class:`EpisodeScan` and the :class:`CubeSizes`), the Redis conversation cache the
:class:`SummaryCache`, ``streams.adapters.sensitive.scanner.SensitiveScanner``
the :class:`SensitiveDetector`; :class:`~streams.memory.provider.ChatCompleter` (the chat
model) and :class:`~streams.memory.cube_locks.CubeLocks` are memory's ports;
:class:`ModelBudget` is kept by ``streams.model_usage.meter.ModelMeter``.

A database store raises what its driver raised: the failure router decides
whether that is an outage to wait out (``is_transient``, built in the
composition root) or a failure of the event. Datetimes are aware UTC unless
a method says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from streams.consolidation.model import (
    CandidateRow,
    Counts,
    Job,
    JobSession,
    Origin,
    PendingExpiry,
    PlannedCandidate,
    Retired,
    Retiring,
    Run,
    SessionMessage,
    SummaryInput,
    SummaryStored,
)
from streams.consolidation.rules.episode_retention import Episode
from streams.consolidation.rules.parts import PartBound
from streams.consolidation.rules.reprocess_plan import PlannedSession, Progress, StoredMessage
from streams.consolidation.rules.sensitive.kinds import Finding
from streams.memory.cube_locks import CubeLocks
from streams.memory.provider import ChatCompleter, ModelCaller, ModelTally

__all__ = ["ChatCompleter", "CubeLocks", "Expiries", "Ledger", "ModelBudget", "ModelCaller",
           "ModelTally", "ReprocessJobs", "Runs", "SensitiveDetector", "Summaries",
           "SummaryCache"]


class ModelBudget(Protocol):
    """The tenants' daily model-token budgets, and what a session end took."""

    def admit(self, tenant_id: str) -> bool:
        """Whether the tenant's work may still call a model today (a refusal is
        counted: the run goes without the model)."""

    def per_message(self, tenant_id: str, tally: ModelTally, messages: int) -> None:
        """Record the tokens a session end took per message it consolidated."""


class Ledger(Protocol):
    """Which messages each closing event owns (a message is claimed once)."""

    async def claim_run(self, run: Run, *, session_seq: int, bound: datetime, size: PartBound,
                        now: datetime, until_event_id: str | None = None,
                        late_since: datetime | None = None, previous: str | None = None) -> None:
        """Claim the event's messages, at most ``size`` (the first ones of the session,
        or, given the run of the ``previous`` part, those after it), and create
        ``run`` with the :class:`~.model.Claim` (how many, up to where, whether the
        session has more) in one transaction it opens and commits; an existing run
        is kept. ``bound`` and ``late_since`` naive UTC."""

    async def claimed_messages(self, tenant_id: str, closed_id: str) -> list[SessionMessage]:
        """The messages ``closed_id`` claimed, oldest first."""

    async def context_before(self, tenant_id: str, conversation_id: str, before_id: int,
                             n: int) -> list[SessionMessage]:
        """Up to ``n`` messages of the conversation before ``before_id``, oldest first."""

    async def other_speaker(self, tenant_id: str, conversation_id: str,
                            user_id: str) -> str | None:
        """A user other than ``user_id`` with messages in the conversation, if any."""

    async def purge(self, cutoff: datetime) -> int:
        """Forget claims older than ``cutoff`` (naive UTC) of finished runs; how many."""


class Runs(Protocol):
    """Each run's state and its persisted candidates; every write its own transaction."""

    async def get(self, closed_id: str) -> Run | None: ...

    async def save_judgement(self, closed_id: str, judge: str,
                             planned: Sequence[PlannedCandidate], now: datetime) -> bool:
        """Persist the candidates, run to ``judged``; False (nothing written) when
        another attempt did first."""

    async def candidates(self, closed_id: str, cube: str | None = None) -> list[CandidateRow]:
        """The run's candidates (of ``cube`` only, when given), by ``seq``."""

    async def save_decisions(self, closed_id: str,
                             decisions: Sequence[tuple[int, str, Sequence[str], str, str]]) -> int:
        """``(seq, action, expire_ids, decider, reason)`` of undecided candidates; how
        many were recorded (fewer: another attempt decided first)."""

    async def skip_unwritten(self, closed_id: str, skips: Sequence[tuple[int, str]],
                             decider: str) -> int:
        """Decided, unwritten candidates ``(seq, reason)`` become skips; how many."""

    async def reopen_unwritten(self, closed_id: str, seqs: Sequence[int]) -> int:
        """Forget the decisions of candidates neither written nor started; how many."""

    async def drop(self, closed_id: str, seqs: Sequence[int]) -> int:
        """Delete candidates ``seqs`` (an erasure covers their users); how many."""

    async def mark_write_started(self, closed_id: str, seqs: Sequence[int],
                                 now: datetime) -> None: ...

    async def mark_written(self, closed_id: str, written: Sequence[tuple[int, str]],
                           now: datetime, origins: Sequence[Origin] = ()) -> int:
        """Record the provider's ids (and ``origins``, together); how many were new."""

    async def mark_expired(self, closed_id: str, seq: int, now: datetime,
                           retired: Retired | None = None) -> None:
        """The row's superseded memories are expired (``retired``: gone from the provider)."""

    async def finish(self, closed_id: str, now: datetime) -> None: ...

    async def record_error(self, closed_id: str, error: str, now: datetime) -> None: ...

    async def purge(self, cutoff: datetime) -> int:
        """Delete runs finished before ``cutoff`` (naive UTC), and runs left ``judged``
        that nothing touched since (no candidate written since, no expiry pending),
        with their candidates; how many."""


class Expiries(Protocol):
    """Expiries that failed after the new memory was written, until one succeeds."""

    async def hand_over(self, run: Run, row: CandidateRow, error: str, now: datetime,
                        first_delay_s: float) -> None:
        """Keep the row's expiry for later and mark the row expired, together."""

    async def due(self, now: datetime, limit: int = 100) -> list[PendingExpiry]: ...

    async def done(self, item: PendingExpiry, now: datetime) -> None:
        """Forget ``item``; its memories' origins are retired."""

    async def failed(self, item: PendingExpiry, error: str, next_at: datetime) -> None: ...

    async def count(self) -> int: ...


class Summaries(Protocol):
    """A conversation's stored summary and what it is made from."""

    async def due(self, tenant_id: str, conversation_id: str, *, due: Callable[[int], bool],
                  newest: int) -> SummaryInput | None:
        """The stored summary and the ``newest`` messages, read in one snapshot; None
        unless ``due(messages above the summary's mark)``."""

    async def store(self, tenant_id: str, conversation_id: str, text: str, *, until: int,
                    total: int, tokens: int, now: datetime) -> SummaryStored:
        """Store the summary covering up to message ``until`` (``total`` messages)."""

    async def kept(self, tenant_id: str, conversation_id: str) -> bool:
        """Whether the conversation has a stored summary (an erasure deletes it)."""


class SummaryCache(Protocol):
    """The copy of summaries the session read path reads (Redis)."""

    @property
    def enabled(self) -> bool: ...

    async def set_summary(self, tenant_id: str, conversation_id: str,
                          summary: dict[str, Any]) -> None:
        """Cache ``summary``; raises ``streams.stores.CacheUnavailable``."""

    async def forget(self, conversations: Sequence[tuple[str, str]]) -> int:
        """Drop the conversations' keys; raises ``streams.stores.CacheUnavailable``."""


class ReprocessJobs(Protocol):
    """The jobs of ``memstream reprocess``: what each rebuilds and replaces."""

    async def conversations(self, tenant_id: str, user_id: str | None) -> list[str]: ...

    async def stored(self, tenant_id: str, conversation_id: str,
                     ) -> tuple[list[StoredMessage], Progress, bool]:
        """A conversation's messages, how far live consolidation took it, and whether
        a live run of it is unfinished."""

    async def create(self, job: Job, sessions: Sequence[tuple[str, str, PlannedSession]],
                     now: datetime) -> Job:
        """Plan the job in one transaction; :class:`~.model.JobConflict` when the tenant
        has an unfinished job."""

    async def job(self, job_id: str) -> Job | None: ...

    async def unfinished(self, tenant_id: str) -> Job | None: ...

    async def sessions(self, job_id: str) -> list[JobSession]: ...

    async def retiring(self, job: Job) -> list[Retiring]:
        """What the job replaces and did not write again, not retired yet, with the
        text of those the built-in provider holds."""

    async def hidden(self, closed_id: str, cube: str, user_id: str) -> set[str]:
        """The ids a job's run must not see in ``cube``."""

    async def retired(self, job: Job, memories: Sequence[Retiring], now: datetime) -> int: ...

    async def providers(self, job: Job) -> set[str]: ...

    async def finish(self, job_id: str, status: str, now: datetime) -> None: ...

    async def counts(self, job: Job) -> Counts: ...

    async def held(self, tenant_id: str,
                   planned: Sequence[tuple[str, PlannedSession]]) -> int: ...

    async def messages(self, tenant_id: str, ids: Sequence[int]) -> list[SessionMessage]: ...


class EpisodeScan(Protocol):
    """The valid episodes of the built-in provider, in id order, a page at a time."""

    async def page(self, after_id: int, limit: int) -> tuple[list[Episode], int | None]:
        """At most ``limit`` valid episodes with an id above ``after_id``, each with its
        rank in its cube and whether its conversation's summary covers it; and the last
        id read (None: no episode is left above ``after_id``)."""
        ...


class CubeSizes(Protocol):
    """How many valid memories a cube holds."""

    async def valid(self, tenant_id: str, cube: str, owner: str) -> int:
        """The valid memories of the cube (``owner``: the user of a user's cube, ``""``
        for an agent's); 0 for a cube not written yet."""
        ...


class SensitiveDetector(Protocol):
    """Finds sensitive content in a text about to enter long-term memory."""

    @property
    def finds_names(self) -> bool:
        """Whether names and places are looked for (else a policy about them is moot)."""

    def detect(self, text: str) -> list[Finding]:
        """Every finding in ``text``, in text order, no two overlapping. Synchronous
        and CPU-bound: a caller on the event loop calls :meth:`detect_all`."""

    async def detect_all(self, texts: Sequence[str]) -> list[list[Finding]]:
        """:meth:`detect` of each text, run off the event loop on the detector's one
        worker thread (one text at a time in the whole process)."""
