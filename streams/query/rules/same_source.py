"""A fact and the episode it was judged from never both take a place in a reply.

Consolidation keeps each chat turn as an episode and also stores the facts the
judge found in it ("I'm vegetarian." from "User: I'm vegetarian, and I work at
Siemens."), both with the turn's event id as their source. Found together,
they would spend two of the caller's ``top_k`` (and budget) on one thing.

:func:`fold_same_source` keeps, of a fact and an episode sharing a source
event, the one that scored higher — the ranking's word on which serves the
query better — and the fact on a tie (it is the judged, typed, shorter form).
The kept memory lists what it stands for in ``metadata["covers"]`` (the
reply's ``covers``). Two facts, or two episodes, are never folded: they say
different things. A passage of a long message (``metadata["span"]``) is never
folded, nor folds a fact: a fact judged from one sentence of the message does
not stand for its other parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from streams.memory.model import StoredMemory

COVERS = "covers"


def fold_same_source(memories: Sequence[StoredMemory]) -> list[StoredMemory]:
    """``memories`` best first, without a fact or episode whose counterpart of the
    other kind (sharing a source event) scored at least as well."""
    ranked = sorted(memories, key=lambda m: (m.score, m.kind != "episode"), reverse=True)
    kept: list[StoredMemory] = []
    covers: dict[int, list[str]] = {}
    facts: dict[str, int] = {}  # source event -> index in kept of the first fact of it
    episodes: dict[str, int] = {}  # the same for episodes
    for m in ranked:
        if m.metadata.get("span") is not None:  # a passage: neither folds nor is folded
            kept.append(m)
            continue
        mine, theirs = (episodes, facts) if m.kind == "episode" else (facts, episodes)
        by = None
        for e in m.source_event_ids:  # the first source event the other kind holds
            if (by := theirs.get(e)) is not None:
                break
        if by is not None:
            covers.setdefault(by, []).append(m.id)
            continue
        for e in m.source_event_ids:
            mine.setdefault(e, len(kept))
        kept.append(m)
    return [replace(m, metadata={**m.metadata, COVERS: covers[i]}) if i in covers else m
            for i, m in enumerate(kept)]
