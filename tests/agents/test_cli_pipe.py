"""The command line stops quietly when its reader goes away (``memstream ... | head``)."""

from __future__ import annotations

import argparse
import os

import pytest

from streams.cli import config
from streams.cli.main import main


def test_a_closed_pipe_ends_the_command_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def reader_gone(args: argparse.Namespace) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(config, "run", reader_gone)
    saved = os.dup(1)
    try:
        assert main(["config", "show"]) == 141  # 128 + SIGPIPE, as a shell reports it
    finally:
        os.dup2(saved, 1)
        os.close(saved)
