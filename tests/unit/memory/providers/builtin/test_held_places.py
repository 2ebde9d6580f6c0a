"""A scope's places and word sets as arrays: the same as a dict of them, through
adds and expiries (which compact the words once half of them are expired), and
read by id for the fusion and MMR (through a table of the ids or a binary search,
whichever the ids' spread allows, after every change)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.memory.providers.builtin.held_places import HeldPlaces

PLACE = st.tuples(st.sampled_from([None, "", "s1", "s2"]), st.integers(-3, 3),
                  st.sampled_from([None, "", "Alice", "Bob"]))
WORDS = st.lists(st.integers(-2**63, 2**63 - 1), max_size=5, unique=True).map(sorted)


def flat(sets: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Word sets as ``HeldPlaces.add`` takes them: end to end, and their sizes."""
    return (np.array([w for s in sets for w in s], dtype=np.int64),
            np.array([len(s) for s in sets], dtype=np.int64))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), PLACE, st.sampled_from(["fact", "preference"])),
                max_size=30), st.data())
def test_the_arrays_are_the_places_of_the_memories_held(
        adds: list[tuple[int, tuple[str | None, int, str | None], str]],
        data: st.DataObject) -> None:
    held = HeldPlaces()
    truth: dict[int, tuple[tuple[str | None, int, str | None], str]] = {}
    said: dict[int, list[int]] = {}
    next_id = 1
    for step, place, kind in adds:
        ids = list(range(next_id, next_id + step))
        next_id += step + data.draw(st.integers(0, 3) | st.integers(0, 60))  # packed or not
        sets = [data.draw(WORDS) for _ in ids]
        held.add(ids, [place] * step, [kind] * step, *flat(sets))
        truth.update({i: (place, kind) for i in ids})
        said.update(zip(ids, sets, strict=True))
        if data.draw(st.booleans()) and truth:
            gone = data.draw(st.lists(st.sampled_from(sorted(truth)), max_size=6))
            held.drop(np.array([*gone, 10**6], dtype=np.int64))  # one never held
            for i in gone:
                truth.pop(i, None)
                said.pop(i, None)
        asked = data.draw(st.lists(st.integers(-2, next_id + 2), max_size=8))
        rows = held.rows(np.array(asked, dtype=np.int64))  # (its table built now, or not)
        assert [int(held.ids[r]) if r >= 0 else None for r in rows.tolist()] == [
            i if i in truth else None for i in asked]
    assert held.ids.tolist() == sorted(truth)
    for names, known, named in ((held.session_names, held.sessions, {p[0] for p, _ in
                                                                     truth.values()} - {None}),
                                (held.speaker_names, held.speakers, {p[2] for p, _ in
                                                                     truth.values()} - {None, ""})):
        assert known == {n: i for i, n in enumerate(names)}
        assert named <= set(names) and len(names) <= max(2 * len(named), 1)
    assert held.words_of(np.arange(len(held))).tolist() == [
        w for i in sorted(said) for w in said[i]]
    assert len(held.words) <= 2 * sum(map(len, said.values())) or not len(held.words)
    picked = data.draw(st.lists(st.integers(0, max(len(held) - 1, 0)), max_size=6)
                       ) if len(held) else []
    rows = np.array(picked, dtype=np.int64)
    assert held.words_of(rows).tolist() == [
        w for r in picked for w in said[int(held.ids[r])]]
    assert held.word_count[rows].tolist() == [len(said[int(held.ids[r])]) for r in picked]
    for i, row in zip(held.ids.tolist(), range(len(held)), strict=True):
        (session, seq, speaker), kind = truth[i]
        code = int(held.session[row])
        assert (held.session_names[code] if code >= 0 else None) == session
        assert int(held.seq[row]) == seq
        who = int(held.speaker[row])
        assert (held.speaker_names[who] if who >= 0 else None) == (speaker or None)
        assert bool(held.preference[row]) == (kind == "preference")
    wanted = np.array([0, *truth, next_id + 5], dtype=np.int64)
    rows = held.rows(wanted)
    assert [int(held.ids[r]) if r >= 0 else None for r in rows.tolist()] == [
        None, *truth, None]


def test_ids_must_ascend_and_places_are_of_memories_held() -> None:
    held = HeldPlaces()
    held.add([5, 6], [("s", 0, None), ("s", 1, "Bo")], ["fact", "fact"],
             *flat([[1], [1]]))
    with pytest.raises(AssertionError):
        held.add([6], [(None, 0, None)], ["fact"], *flat([[]]))
    with pytest.raises(AssertionError):
        held.add([9, 8], [(None, 0, None)] * 2, ["fact"] * 2, *flat([[], []]))
    places = held.places(np.array([5, 6], dtype=np.int64))
    assert places.session.tolist() == [0, 0] and places.speaker.tolist() == [-1, 0]
    with pytest.raises(AssertionError):
        held.places(np.array([7], dtype=np.int64))
