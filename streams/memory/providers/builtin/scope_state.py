"""What a worker holds of one memory scope at one version.

A :class:`ScopeState` holds every valid memory's place (session, order,
speaker), type and kind, its word set (for MMR without an embedder; places
and words as arrays, :mod:`.held_places`), its vector when an embedder is
configured (and, for large scopes, a graph of the vectors, :mod:`.ann`),
and the scope's lexical index: the postings of every
term of its memories' text, built from the text when the scope is loaded,
and of the subject terms searches asked for (read from ``memory_term``).
Everything per memory is a plain value or array the garbage collector does
not follow. :mod:`.scope_cache` keeps the states and brings them forward.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from streams.clock import aware_utc
from streams.memory.providers.builtin.ann import VectorIndex
from streams.memory.providers.builtin.held_places import HeldPlaces
from streams.memory.providers.builtin.row_features import SUBJECT, features_of
from streams.memory.providers.builtin.rows import DbRow, Vector
from streams.memory.rules.lexical import KeptParts, PostingArrays
from streams.memory.rules.mmr import word_ids

Ids = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
_EMPTY_IDS: Ids = np.zeros(0, dtype=np.int64)
_EMPTY: Floats = np.zeros(0, dtype=np.float64)
COMPACT_AFTER = 256  # expired memories whose postings are masked before the index is rebuilt


# one term's postings in a scope, by ascending memory id: (ids, tf, doc_len), a plain
# tuple of arrays, which the garbage collector does not track
Postings: TypeAlias = PostingArrays


def is_subject(term: str) -> bool:
    return term.startswith(SUBJECT)


@dataclass
class ScopeState:
    scope_id: int
    version: int
    doc_count: int
    total_len: int
    last_id: int  # highest memory id seen; every later memory of the scope is newer
    # per memory (session, seq, speaker) as a plain tuple, which the garbage collector
    # stops tracking (it keeps tracking a tuple subclass such as Position)
    positions: dict[str, tuple[str | None, int, str | None]] = field(default_factory=dict)
    episodes: set[str] = field(default_factory=set)  # the others are facts (add_rows, drop)
    slots: dict[tuple[str, int], str] = field(default_factory=dict)
    places: HeldPlaces = field(default_factory=HeldPlaces)  # the places, word sets, as arrays
    vec_keys: list[str] = field(default_factory=list)  # ascending ids, one per matrix row
    vec_ids: Ids = field(default_factory=lambda: _EMPTY_IDS)  # the same as integers
    vec_index: dict[str, int] = field(default_factory=dict)
    # every word term of the memories' text, and the subject terms read so far
    terms: dict[str, Postings] = field(default_factory=dict)
    subjects: set[str] = field(default_factory=set)  # the subject terms in ``terms``
    dead: Ids = field(default_factory=lambda: _EMPTY_IDS)  # expired, still in some postings
    postings: int = 0  # entries in ``terms``
    ann: VectorIndex | None = None  # a graph of the vectors, for large scopes (:mod:`.ann`)
    bm25_parts: KeptParts = field(default_factory=KeptParts)  # of the terms searched
    vec_changes: int = 0  # vectors added or dropped so far
    _buf: Vector | None = None
    # ``episodes`` as ascending integers, once per change (add_rows and drop reset it)
    _episode_ids: Ids | None = field(default=None, init=False, repr=False, compare=False)

    def episode_ids(self) -> Ids:
        """The ids of the episodes held, ascending, read-only (the others held are
        facts). ``episodes`` changes through :meth:`add_rows` and :meth:`drop` only."""
        if self._episode_ids is None:
            ids = np.sort(np.fromiter((int(k) for k in self.episodes), np.int64,
                                      len(self.episodes)))
            ids.flags.writeable = False
            self._episode_ids = ids
        return self._episode_ids

    @property
    def matrix(self) -> Vector:
        assert self._buf is not None
        return self._buf[: len(self.vec_keys)]

    def add_rows(self, rows: Sequence[DbRow], *, index: bool = True) -> None:
        """Whole memory rows (ids above every held one): places, word sets and (unless
        not ``index``) the postings of their text."""
        self.bm25_parts.clear()
        grown: dict[str, tuple[list[int], list[float], list[float]]] = {}
        ids: list[int] = []
        places: list[tuple[str | None, int, str | None]] = []
        types: list[str] = []
        sources: list[str | None] = []
        assistant: list[bool] = []
        instruction: list[bool] = []
        times: list[float] = []
        changed: list[bool] = []
        values: list[int] = []
        words, counts = array("q"), array("q")  # int64, without an object per word
        for r in rows:
            k, i = str(r.id), int(r.id)
            f = features_of(r)
            p = (r.session_key, int(r.seq), f.speaker)
            self.positions[k] = p
            ids.append(i)
            places.append(p)
            types.append(str(r.type))
            # an episode's source events, as stored: the passages of one message share them
            sources.append(r.source_event_ids if r.kind == "episode" else None)
            assistant.append(r.role == "assistant")
            instruction.append(f.instruction)
            times.append(aware_utc(r.event_time).timestamp() if r.event_time else math.nan)
            changed.append(f.changed)
            values.append(f.value)
            if r.kind == "episode":
                self.episodes.add(k)
                self._episode_ids = None
            if p[0] is not None:
                self.slots[(p[0], p[1])] = k
            mine = word_ids(f.words)
            words.extend(mine)
            counts.append(len(mine))
            if index:
                dl = float(r.doc_len)
                for term, tf in f.terms.items():
                    entry = grown.get(term)
                    if entry is None:
                        entry = grown[term] = ([], [], [])
                    entry[0].append(i)
                    entry[1].append(float(tf))
                    entry[2].append(dl)
            self.last_id = max(self.last_id, i)
        for term, (held, tfs, dls) in grown.items():
            self._append(term, np.array(held, np.int64), np.array(tfs), np.array(dls))
        self.places.add(ids, places, types, np.frombuffer(words, np.int64).copy(),
                        np.frombuffer(counts, np.int64).copy(), sources, assistant,
                        (times, changed, values), instruction)

    def _append(self, term: str, ids: Ids, tf: Floats, dl: Floats) -> None:
        held = self.terms.get(term)
        self.terms[term] = (ids, tf, dl) if held is None else (
            np.concatenate([held[0], ids]), np.concatenate([held[1], tf]),
            np.concatenate([held[2], dl]))
        self.postings += len(ids)

    def add_vectors(self, keys: list[str], vectors: Vector) -> None:
        """Append rows (ids above every held one, so the order stays ascending)."""
        assert self._buf is not None
        n, need = len(self.vec_keys), len(self.vec_keys) + len(keys)
        if need > len(self._buf):
            grown = np.empty((max(need, 2 * len(self._buf), 16), self._buf.shape[1]), np.float32)
            grown[:n] = self._buf[:n]
            self._buf = grown
        self._buf[n:need] = vectors
        for i, k in enumerate(keys, start=n):
            self.vec_index[k] = i
        self.vec_keys.extend(keys)
        ints = np.array([int(k) for k in keys], np.int64)
        self.vec_ids = np.concatenate([self.vec_ids, ints])
        self.vec_changes += 1
        if self.ann is not None:
            self.ann.add(ints, vectors)

    def add_postings(self, rows: Sequence[DbRow], read_for: set[str]) -> None:
        """New postings (ids above the held ones) of the subject terms ``read_for``; other
        subject terms held (taken in meanwhile) are let go, to be read again."""
        self.bm25_parts.clear()
        for term in self.subjects - read_for:
            self.postings -= len(self.terms.pop(term)[0])
        self.subjects &= read_for
        by_term: dict[str, list[DbRow]] = {}
        for r in rows:
            if r.term in self.subjects:
                by_term.setdefault(r.term, []).append(r)
        for term, new in by_term.items():
            new.sort(key=lambda r: int(r.memory_id))
            self._append(term, np.array([int(r.memory_id) for r in new], np.int64),
                         np.array([float(r.tf) for r in new]),
                         np.array([float(r.doc_len) for r in new]))

    def keep(self, loaded: dict[str, Postings]) -> None:
        """Hold subject postings read at the state's version."""
        for term, p in loaded.items():
            if is_subject(term) and term not in self.terms:
                self.terms[term] = p
                self.subjects.add(term)
                self.postings += len(p[0])

    def postings_of(self, term: str) -> Postings | None:
        """The term's postings without expired memories (None: not held)."""
        p = self.terms.get(term)
        if p is None or not len(self.dead) or not len(p[0]):
            return p
        alive = ~np.isin(p[0], self.dead, assume_unique=True)
        if alive.all():
            return p
        p = (p[0][alive], p[1][alive], p[2][alive])
        self.postings -= len(alive) - len(p[0])
        self.terms[term] = p  # masked once: the next search reads it as it is
        return p

    def drop(self, gone: set[str]) -> None:
        """Forget memories that were expired."""
        self.bm25_parts.clear()
        self._episode_ids = None
        for k in gone:
            session, seq, _ = self.positions.pop(k)
            self.episodes.discard(k)
            if session is not None:
                self.slots.pop((session, seq), None)
        if self._buf is not None and any(k in self.vec_index for k in gone):
            self.vec_changes += 1
            if self.ann is not None:
                self.ann.remove(np.array([int(k) for k in gone if k in self.vec_index]))
            keep = [i for i, k in enumerate(self.vec_keys) if k not in gone]
            self._buf = np.ascontiguousarray(self.matrix[keep])
            self.vec_keys = [self.vec_keys[i] for i in keep]
            self.vec_ids = self.vec_ids[keep]
            self.vec_index = {k: i for i, k in enumerate(self.vec_keys)}
        dropped = np.array([int(k) for k in gone], dtype=np.int64)
        self.places.drop(dropped)
        self.dead = np.union1d(self.dead, dropped)
        if len(self.dead) > COMPACT_AFTER:
            for term in list(self.terms):
                self.postings_of(term)
            self.dead = _EMPTY_IDS


def postings_of(rows: Sequence[DbRow], terms: Sequence[str]) -> dict[str, Postings]:
    """Rows of ``(term, memory_id, tf, doc_len)`` by term, every term present (maybe empty)."""
    grouped: dict[str, list[DbRow]] = {t: [] for t in terms}
    for r in rows:
        grouped.setdefault(r.term, []).append(r)
    out: dict[str, Postings] = {}
    for term, rs in grouped.items():
        if not rs:
            out[term] = (_EMPTY_IDS, _EMPTY, _EMPTY)
            continue
        rs.sort(key=lambda r: int(r.memory_id))
        out[term] = (np.array([int(r.memory_id) for r in rs], np.int64),
                     np.array([float(r.tf) for r in rs]),
                     np.array([float(r.doc_len) for r in rs]))
    return out
