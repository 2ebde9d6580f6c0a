"""The one parser of Kafka bootstrap addresses (settings, the worker and the client)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import pytest

from streams.adapters.kafka.bootstrap import bootstrap_servers


@pytest.mark.parametrize(
    ("broker", "servers"),
    [
        pytest.param("kafka://127.0.0.1:9092", ["127.0.0.1:9092"], id="setting-default"),
        pytest.param("localhost:9092", ["localhost:9092"], id="no-scheme"),
        pytest.param("kafka://h1:9092;kafka://h2:9092", ["h1:9092", "h2:9092"], id="semicolons"),
        pytest.param("h1:9092,h2:9092", ["h1:9092", "h2:9092"], id="commas"),
        pytest.param("kafka://h1:9092, h2:9092 ;kafka://h3:9093", ["h1:9092", "h2:9092", "h3:9093"],
                     id="mixed-separators-and-blanks"),
        pytest.param("kafka://h1:9092/", ["h1:9092"], id="trailing-slash"),
        pytest.param("kafka://h1:9092//", ["h1:9092"], id="trailing-slashes"),
        pytest.param("  kafka://h1:9092  ", ["h1:9092"], id="blanks-around"),
        pytest.param("h1:9092;;,h2:9092;", ["h1:9092", "h2:9092"], id="empty-entries"),
        pytest.param("sasl+ssl://h1:9094", ["h1:9094"], id="any-scheme"),
        pytest.param("h1", ["h1"], id="no-port"),
        pytest.param("", [], id="empty"),
        pytest.param(" ; , ", [], id="only-separators"),
        pytest.param(["kafka://h1:9092", "h2:9092,h3:9092"], ["h1:9092", "h2:9092", "h3:9092"],
                     id="sequence"),
        pytest.param(("h1:9092",), ["h1:9092"], id="tuple"),
        pytest.param([], [], id="empty-sequence"),
    ],
)
def test_bootstrap_servers(broker: str | Sequence[str], servers: list[str]) -> None:
    assert bootstrap_servers(broker) == servers


def test_the_client_loads_no_settings_and_no_other_adapter() -> None:
    """``streams.client`` needs only ``streams.wire``, this helper, the security options,
    its hedges' routes and the trace context (``streams.tracing``, the OpenTelemetry API
    only)."""
    code = ("import json, sys, streams.client; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('streams'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert [m for m in loaded if not m.startswith("streams.wire")] == [
        "streams", "streams.adapters", "streams.adapters.kafka",
        "streams.adapters.kafka.bootstrap", "streams.adapters.kafka.security", "streams.client",
        "streams.client_routes", "streams.tracing"]
