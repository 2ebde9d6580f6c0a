"""``memstream reprocess`` refuses bad input with exit code 2 before it connects anywhere."""

from __future__ import annotations

import pytest

from streams.cli.main import main


@pytest.mark.parametrize(("argv", "says"), [
    (["--tenant", "t1\n"], "invalid tenant id"),
    (["--tenant", "../x"], "invalid tenant id"),
    (["--tenant", ""], "invalid tenant id"),
    (["--tenant", "t1", "--user", ""], "--user must be 1 to 255 characters"),
    (["--tenant", "t1", "--user", "u" * 256], "--user must be 1 to 255 characters"),
    (["--tenant", "t1", "--since", "2026-11-01T00:00:00"], "RFC 3339"),
    (["--tenant", "t1", "--since", "2026-11-01T00:00:00Z\n"], "RFC 3339"),
    (["--tenant", "t1", "--since", "0001-01-01T00:00:00+01:00"], "not a time memstream"),
    (["--tenant", "t1", "--since", "9999-12-31T23:59:59-01:00"], "not a time memstream"),
    (["--tenant", "t1", "--no-judge"], "--no-judge goes with --dry-run"),
])
def test_bad_input_is_refused_clearly(argv: list[str], says: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reprocess", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
