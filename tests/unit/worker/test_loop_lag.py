"""How late a timer woke, and when a hold is logged (no event loop)."""

from __future__ import annotations

import pytest

from streams.worker.loop_lag import LoopLagWatch

# (wake-up times, lags, indexes of the ticks that log, and the first logged line)
CASES = [
    pytest.param([0.0, 0.1, 0.2, 0.3], [0.0, 0.0, 0.0, 0.0], [], None, id="on time"),
    pytest.param([0.0, 0.05, 0.2], [0.0, 0.0, 0.05], [], None, id="early is no lag"),
    pytest.param([0.0, 0.1, 0.6], [0.0, 0.0, 0.4], [2],
                 "event loop held for 400 ms (1 hold of at least 250 ms since the last such line)",
                 id="a hold is told at once"),
    pytest.param([0.0, 0.5, 1.0, 1.5, 6.9], [0.0, 0.4, 0.4, 0.4, 5.3], [1, 4],
                 "event loop held for 400 ms (1 hold of at least 250 ms since the last such line)",
                 id="then at most one line every 5 s"),
    pytest.param([0.0, 0.3499, 0.35], [0.0, 0.2499, 0.0], [], None,
                 id="under the threshold is only measured"),
]


@pytest.mark.parametrize(("wakes", "lags", "logged", "first"), CASES)
def test_lag_and_lines(wakes: list[float], lags: list[float], logged: list[int],
                       first: str | None) -> None:
    watch = LoopLagWatch()
    seen = [watch.tick(t) for t in wakes]
    assert [lag for lag, _ in seen] == pytest.approx(lags, abs=1e-9)
    assert [i for i, (_, line) in enumerate(seen) if line] == logged
    assert next((line for _, line in seen if line), None) == first


def test_the_line_after_a_quiet_gap_counts_every_hold_since_the_last_line() -> None:
    watch = LoopLagWatch()
    lines = [watch.tick(t)[1] for t in (0.0, 0.5, 1.5, 2.8, 5.6)]
    assert lines[1] is not None and lines[2] is None and lines[3] is None
    assert lines[4] == ("event loop held for 2700 ms (3 holds of at least 250 ms "
                        "since the last such line)")
