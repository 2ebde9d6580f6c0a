"""A memory's score as the provider contract shows it: within 0..1, six decimals.

:func:`shown_score` is the rule: ``round(min(1.0, max(0.0, x)), 6)`` (NaN shows as
0.0). :func:`shown_scores` gives the same floats, bit for bit, for a search's whole
list of picks at once: Python's ``round`` to six decimals converts each float to its
decimal digits and back, a third of the cost of building the memory it scores.

Why the array form is exact: for ``x`` in 0..1, ``x * 1e6`` is within 2**-33 of the
exact product, so its nearest integer ``n`` is the exact product's unless that
product lies within 2**-33 of a half; ``n / 1e6`` is then the float nearest to the
decimal ``n`` millionths, which is what ``round`` gives. Products within 1e-6 of a
half (ties included) are left to ``round`` itself.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

DECIMALS = 6
_SCALE = 10.0**DECIMALS
_NEAR_HALF = 1e-6  # far above the product's error (2**-33), far below a step (1.0)


def shown_score(x: float) -> float:
    return round(min(1.0, max(0.0, x)), DECIMALS)


def shown_scores(xs: npt.NDArray[np.float64]) -> list[float]:
    """:func:`shown_score` of each of ``xs``, in order."""
    x = np.asarray(xs, dtype=np.float64)
    clamped = np.where(x > 0.0, np.minimum(x, 1.0), 0.0)  # as max(0.0, x): NaN, -0.0 → 0.0
    scaled = clamped * _SCALE
    out: list[float] = (np.rint(scaled) / _SCALE).tolist()
    half = np.abs(scaled - np.floor(scaled) - 0.5) < _NEAR_HALF
    for i in np.flatnonzero(half).tolist():
        out[i] = shown_score(float(clamped[i]))
    return out
