"""The request/reply contract of ``test_query_contract`` again, every request answered
by the worker's query process (``query.process`` ``own``): agent configurations
followed from their topic, dead letters, the search log and the Spring headers, as
the worker answers them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.conftest import Stack, new_stack
from tests.integration.test_query_contract import *  # noqa: F403  (the same tests)
from tests.integration.test_query_contract import pytestmark  # noqa: F401


@pytest.fixture(scope="module")
def shared_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with new_stack(tmp_path_factory.mktemp("own")) as s:
        s.extra_env["MEMSTREAM_QUERY__PROCESS"] = "own"
        yield s
