"""BEAM-shaped memories and questions for the query benchmark (``--shape beam``).

The memories are what consolidation stores of the BEAM chats
(``../shared/bench/beam-100k``: a user and an AI assistant over weeks of a
project, long answers with code): every session of every chat in turn, each
message made into episodes by the product's own :func:`episodes_of` — a user's
message whole (``User: …``, cut to 2,000 characters, ``role="user"``), an
assistant's longer than 1,000 characters cut into passages of about 600 (its
:func:`~streams.consolidation.rules.passages.passages`; ``Assistant: …``,
``role="assistant"``, each with its ``span`` in the message). That sequence (the
*base*, 12,742 episodes of the ten chats) is read once per process.

A cube is a stream of it: memory ``i`` of a stream starting at ``offset`` is base
episode ``(offset + i) mod len(base)`` of copy ``(offset + i) // len(base)``, a
pure function of the stream and ``i`` — so the first 1,000 memories of a cube of
100,000 are its cube of 1,000, and vectors embedded once serve every size. A
copy beyond the first says so at the end of its text (`` (copy 2)``) and in its
source event ids, and is dated two years later per copy, so its content hash,
session and times are its own. The episodes of one BEAM session form one
session, as one consolidation's ``add`` call makes them (the session key is the
one :func:`~streams.memory.providers.builtin.writes.prepare` derives from the
session's first episode, given explicitly so that a session split between two
sizes stays one). The scale mode's user is the stream at offset 0; user ``u`` of
the default mode talks chat ``u mod 10`` in copy ``u // 10`` (:func:`user_offset`).

The agent's cube holds :data:`LESSONS`, twenty short lessons of a coding
assistant (facts of type ``skill``), at every size. The questions are BEAM's
probing questions (:func:`questions`). Vectors: MiniLM's of the base episodes
as far as they are embedded and cached (``.bench/scale-vectors-beam-*.npy``,
:func:`scale_data.embed`), a later copy its base episode's vector plus noise,
as :func:`scale_data.scale_vectors` makes the vectors it does not embed
(:func:`vectors`).

    python bench/beam_shape.py --embed 12742    # fill the vector cache (every base episode)
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import scale_data  # noqa: E402

from streams.consolidation.model import SessionMessage  # noqa: E402
from streams.consolidation.pipeline import PassageCut, episodes_of  # noqa: E402
from streams.devtools.beam.dataset import load_chats  # noqa: E402
from streams.memory.model import MemoryCandidate  # noqa: E402
from streams.memory.providers.builtin.rows import content_hash  # noqa: E402

DATA = ROOT.parent / "shared" / "bench" / "beam-100k"
CACHE_KEY = "beam"  # the vector cache's name (scale_data: scale-vectors-beam-N.npy)
EPISODE_MAX_CHARS = 2000  # ConsolidationSettings.episode_max_chars
COPY_DAYS = 730  # a later copy is dated this much later per copy
NOISE_SEED = 11

LESSONS = (
    "When the user asks for code, give a complete runnable example with its imports.",
    "The user prefers Python with type hints and short functions.",
    "Explain an error by quoting the failing line before proposing a fix.",
    "Suggest tests alongside every new function the user writes.",
    "Keep database migrations reversible and name them by what they change.",
    "For Flask apps, put configuration in environment variables, not in the code.",
    "Prefer parameterised SQL queries; never build SQL from user input.",
    "When the user shares a deadline, break the work into sprint tasks with dates.",
    "Summarise long answers with a short list of next steps at the end.",
    "Ask which version of a library the user runs before suggesting its API.",
    "Recommend logging with levels instead of print statements in services.",
    "For deployment questions, mention health checks and rollback first.",
    "Keep secrets out of git: use a .env file listed in .gitignore.",
    "When the user compares two options, give a table of trade-offs.",
    "Point out security issues (XSS, CSRF, injection) when reviewing web code.",
    "Use pagination for list endpoints that can return many rows.",
    "Cache expensive queries only after measuring that they are slow.",
    "When the user is stuck, propose the smallest change that can be tested.",
    "Document API endpoints with their request and response examples.",
    "Remind the user to back up the database before a schema change.",
)


@dataclass(frozen=True)
class Episode:
    """One memory of a BEAM-shaped cube: the candidate as consolidation makes it, the
    session it belongs to, and the base episode it is a copy of."""

    candidate: MemoryCandidate
    session: str  # the session key of its BEAM session (and copy)
    base: int  # its index in the base sequence
    chat: str


@dataclass(frozen=True)
class _Base:
    candidate: MemoryCandidate
    chat: str
    session: int  # the BEAM session's number in its chat
    first_event: str  # the event id of its session's first episode


def session_key(first_event: str) -> str:
    """The key :func:`~streams.memory.providers.builtin.writes.prepare` gives the episodes
    of one ``add`` call whose first episode has ``first_event`` as its first source."""
    return "batch:" + hashlib.sha1(first_event.encode()).hexdigest()[:20]


@lru_cache(maxsize=2)
def _chats(data: Path = DATA) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(chat id, its probing questions) of every chat."""
    return tuple((c.chat_id, tuple(q.question for q in c.questions if q.question.strip()))
                 for c in load_chats(data))


@lru_cache(maxsize=2)
def base(data: Path = DATA) -> tuple[_Base, ...]:
    """The base sequence: every chat's sessions in order, each message as
    :func:`episodes_of` makes it, less the repeats the provider would store once (the
    same passage twice in one message: 94 of 12,836). A turn is dated its session's
    start plus a minute per turn before it."""
    out: list[_Base] = []
    seen: set[str] = set()
    cut = PassageCut()
    for chat in load_chats(data):
        for session in chat.sessions:
            messages = [SessionMessage(id=t.id, event_id=f"beam-{chat.chat_id}-{t.id}",
                                       role=t.role, content=t.content,
                                       created_at=(session.start + timedelta(minutes=k))
                                       .replace(tzinfo=UTC))
                        for k, t in enumerate(session.turns)]
            planned = episodes_of(messages, EPISODE_MAX_CHARS, cut)
            if not planned:
                continue
            first = planned[0].candidate.source_event_ids[0]
            for p in planned:  # a passage repeated within a message is stored once
                if (h := content_hash(p.candidate)) not in seen:
                    seen.add(h)
                    out.append(_Base(p.candidate, chat.chat_id, session.number, first))
    return tuple(out)


def chat_starts(data: Path = DATA) -> dict[str, int]:
    """Where each chat's episodes begin in the base sequence."""
    out: dict[str, int] = {}
    for i, b in enumerate(base(data)):
        out.setdefault(b.chat, i)
    return out


def user_offset(user: int, data: Path = DATA) -> int:
    """Where user ``user``'s stream starts (the default mode): chat ``user mod 10`` of
    copy ``user // 10``."""
    starts = list(chat_starts(data).values())
    return starts[user % len(starts)] + len(base(data)) * (user // len(starts))


def _copied(event: str, copy: int) -> str:
    return event if copy == 0 else f"{event}-copy{copy + 1}"


def episode(offset: int, i: int, data: Path = DATA) -> Episode:
    """Memory ``i`` of the stream starting at ``offset``."""
    seq = base(data)
    g = offset + i
    b, copy = seq[g % len(seq)], g // len(seq)
    c = b.candidate
    if copy:
        c = replace(c, content=f"{c.content} (copy {copy + 1})",
                    source_event_ids=tuple(_copied(e, copy) for e in c.source_event_ids),
                    event_time=(c.event_time + timedelta(days=COPY_DAYS * copy)
                                if c.event_time is not None else None))
    return Episode(c, session_key(_copied(b.first_event, copy)), g % len(seq), b.chat)


def episodes(offset: int, lo: int, hi: int, data: Path = DATA) -> list[Episode]:
    """Memories ``lo`` .. ``hi - 1`` of the stream starting at ``offset``."""
    return [episode(offset, i, data) for i in range(lo, hi)]


def by_session(eps: Sequence[Episode]) -> Iterator[tuple[str, list[Episode]]]:
    """``eps`` as runs of one session each, in order: one ``add`` call per run."""
    run: list[Episode] = []
    for e in eps:
        if run and e.session != run[-1].session:
            yield run[-1].session, run
            run = []
        run.append(e)
    if run:
        yield run[-1].session, run


def lesson(i: int) -> MemoryCandidate:
    """Memory ``i`` of the agent's cube (``i`` < ``len(LESSONS)``)."""
    return MemoryCandidate(content=LESSONS[i], type="skill", scope="agent", importance=0.6,
                           event_time=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=i),
                           source_event_ids=(f"lesson-{i}",))


def questions(chat: str | None = None, data: Path = DATA) -> list[str]:
    """BEAM's probing questions, of one chat or of all."""
    return [q for c, qs in _chats(data) if chat in (None, c) for q in qs]


def user_chat(user: int, data: Path = DATA) -> str:
    """The chat user ``user`` of the default mode talks (:func:`user_offset`)."""
    ids = [c for c, _ in _chats(data)]
    return ids[user % len(ids)]


def question(rng: random.Random, chat: str | None = None) -> str:
    return rng.choice(questions(chat))


def base_text(i: int) -> str:
    """The text of base episode ``i`` (what is embedded)."""
    return base()[i].candidate.content


def vectors(places: Sequence[int], embedded_at_least: int = 0,
            ) -> tuple[npt.NDArray[np.float32], int]:
    """The vectors of the memories at these places of the streams (``offset + i``), and
    how many base episodes are embedded. A base episode's own vector is MiniLM's (from
    the cache, embedding first up to ``embedded_at_least`` of them); a later copy's, or
    any of a base episode not embedded, is an embedded vector (its base episode's, else
    a random one) plus Gaussian noise of half the set's spread, renormalised, as
    :func:`scale_data.scale_vectors` makes them; the noise is a function of the place
    alone."""
    total = len(base())
    done = min(total, scale_data.largest_cached(CACHE_KEY))
    if done < min(total, embedded_at_least):
        done = min(total, embedded_at_least)
        scale_data.embed(CACHE_KEY, done, batch=256, keep_every=1024, text=base_text)
    if not done:
        raise SystemExit("no BEAM vectors cached: python bench/beam_shape.py --embed N")
    real = np.asarray(scale_data.cached_vectors(CACHE_KEY, done), dtype=np.float32)
    spread = float(real.std())
    out = np.empty((len(places), real.shape[1]), dtype=np.float32)
    for row, g in enumerate(places):
        b = g % total
        if g < total and b < done:
            out[row] = real[b]
            continue
        rng = np.random.default_rng((NOISE_SEED, g))
        v = real[b] if b < done else real[int(rng.integers(0, done))]
        v = v + rng.normal(0, spread / 2, v.shape).astype(np.float32)
        out[row] = v / np.linalg.norm(v)
    return out, done


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embed", type=int, required=True,
                    help=f"base episodes to embed (all: {len(base())})")
    args = ap.parse_args()
    n = min(args.embed, len(base()))
    scale_data.embed(CACHE_KEY, n, batch=256, keep_every=1024, text=base_text)
