"""The worker's HTTP endpoints on the Faust web server: /metrics (memstream's
metrics and Faust's own sensor, prefixed ``faust_``)."""

from __future__ import annotations

from typing import Any

from faust.sensors.prometheus import setup_prometheus_sensors


def install(app: Any) -> None:
    setup_prometheus_sensors(app, pattern="/metrics", name_prefix="faust")
