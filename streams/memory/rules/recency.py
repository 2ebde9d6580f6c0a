"""Newer statements first: among memories about what the query asks, an update ranks above
what it updates.

A project moves: "the API answers in 400 ms" in March, "now averaging around 250
ms" in April. Both match a question about the response time, and the older one
often matches it better (its session talks of nothing else). :func:`newer_first`
looks at a cube's ``depth`` best memories and lets a newer one take the place
of an older one it updates, when

* it is newer by at least ``min_gap_s`` (said another time, not in the same
  breath),
* it says so — it announces a change (:func:`announces_change`: "now",
  "increased to", "moved the call to", "the new deadline of", "switched to") —
  or it states a value (:func:`value_signature`: a number, a date, a version)
  the older one states differently,
* the two match the same part of the query: what they share is at least
  ``overlap`` of what the one matching less holds (by idf), and at least
  ``share`` of the query,
* and it scores at most ``band`` below the older one.

It and the older ones it updates share out their scores newest first (an
update of an update ends above both: updates are taken in time order), so
nothing rises from far below and the set of scores, and with it every cut by
score, stays the same; only memories over the search's relativity floor take part,
so the ones a reply keeps are the same, in another order. The judge's supersession
retires an old fact when it recognises the update; this ordering holds whether
or not it did, and for episodes, which are never superseded.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Ids = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]

_CHANGE = re.compile(
    r"\b(?:improved|increased|decreased|grown|grew|reached|risen|rose|dropped|fallen|fell"
    r"|adjusted|changed|moved|rescheduled|updated|extended|shortened|raised|lowered|bumped"
    r"|switched|expanded|shifted|pushed|postponed|upgraded|downgraded|reduced|boosted|revised"
    r"|added|cut|moving|rescheduling|changing|switching|shifting|pushing|extending|postponing"
    r"|upgrading"
    r"|now\s+(?:at|averag\w*|has|have|is|are|totals?|stands|using|use|\d))\b"
    r"|\bnew\s+(?:[\w,-]+\s+){0,4}(?:of|is|at|to|on|by|for|deadline|date|time|target|goal"
    r"|quota|limit|total)\b|\bhas\s+now\b|\bany\s*more\b|\bno\s+longer\b",
    re.I,
)
_VALUE = re.compile(
    r"\d+(?:[.,:]\d+)*\s*(?:%|ms|s|h|k|m|gb|mb|kb)?|\b(?:january|february|march|april|may"
    r"|june|july|august|september|october|november|december)\s+\d{1,2}\b"
    r"|\b(?:january|february|march|april|june|july|august|september|october|november"
    r"|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|yesterday"
    r"|one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|thirty|forty|fifty"
    r"|hundred|thousand|half|double|twice)\b",
    re.I,
)


def states_value(text: str) -> bool:
    """Whether ``text`` states a value: a number, a date, a day, a version, a count."""
    return _VALUE.search(text) is not None


def announces_change(text: str) -> bool:
    """Whether ``text`` says that something changed, and to what value."""
    return _CHANGE.search(text) is not None and states_value(text)


def value_signature(text: str) -> int:
    """A number standing for the values ``text`` states (numbers, dates, versions, with
    their units), 0 when it states none: two texts stating the same values have the
    same one."""
    found = sorted({v.casefold().replace(" ", "") for v in _VALUE.findall(text)})
    if not found:
        return 0
    return zlib.crc32("\x1f".join(found).encode()) + 1


@dataclass(frozen=True)
class Recency:
    """The parameters of :func:`newer_first` (``depth`` 0: off)."""

    depth: int = 10
    band: float = 0.5
    share: float = 0.2
    overlap: float = 0.5
    min_gap_s: float = 3600.0


def newer_first(scores: Floats, times: Floats, changed: Flags, values: Ids, matched: Flags,
                idf: Floats, rule: Recency = Recency(), *, floor: float = 0.0) -> Floats:
    """``scores`` with the updates among the ``rule.depth`` best moved above what they update
    (see the module doc). ``times``: event times in seconds (NaN: unknown, never
    newer or older); ``changed``: :func:`announces_change` of each; ``values``: its
    :func:`value_signature`; ``matched``: an (n, terms) table of the query's terms
    each holds; ``idf``: each term's weight. Only memories scoring at least ``floor``
    take part, so a cut at ``floor`` keeps the same members."""
    n = len(scores)
    if n < 2 or rule.depth < 2 or not len(idf):
        return scores
    top = np.argsort(-scores, kind="stable")[:rule.depth]
    top = top[scores[top] >= floor]
    out = scores.copy()
    total = float(idf.sum())
    weight = matched[top].astype(np.float64) @ idf  # each one's matched mass
    for jj in np.argsort(times[top], kind="stable").tolist():
        j = int(top[jj])
        if np.isnan(times[j]) or not (changed[j] or values[j]) or weight[jj] <= 0:
            continue
        updated = []  # the older ones it updates that score above it
        for ii, i in enumerate(top.tolist()):
            if not times[i] <= times[j] - rule.min_gap_s:  # NaN too
                continue
            if not out[j] < out[i] <= out[j] + rule.band:
                continue
            if not changed[j] and (values[i] == 0 or values[i] == values[j]):
                continue
            shared = float((matched[i] & matched[j]).astype(np.float64) @ idf)
            if (shared < rule.overlap * min(weight[jj], weight[ii]) - 1e-9
                    or shared < rule.share * total):
                continue
            updated.append(i)
        if updated:  # their scores and its own, newest first
            group = [j, *updated]
            by_time = sorted(group, key=lambda k: (-times[k], -out[k]))
            out[by_time] = np.sort(out[group])[::-1]
    return out
