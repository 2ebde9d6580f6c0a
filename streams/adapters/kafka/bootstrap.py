"""Kafka bootstrap addresses as aiokafka wants them: a list of ``host:port``.

The one parser of a broker setting (``MEMSTREAM_KAFKA__BROKER``) and of the
address a :class:`~streams.client.MemoryClient` is given. Imports nothing of
memstream, so the client can use it without the settings or the adapters.
"""

from __future__ import annotations

from collections.abc import Sequence


def bootstrap_servers(broker: str | Sequence[str]) -> list[str]:
    """``"kafka://h1:9092;kafka://h2:9092"`` -> ``["h1:9092", "h2:9092"]``.

    ``broker`` is one string or several; each may list addresses separated by
    ``;`` or ``,``. A scheme (``kafka://``) and trailing slashes are dropped,
    blanks around an address and empty entries ignored; ports are kept as given.
    """
    items = [broker] if isinstance(broker, str) else list(broker)
    out: list[str] = []
    for item in items:
        for part in item.replace(",", ";").split(";"):
            part = part.strip()
            if part:
                out.append(part.split("://", 1)[-1].rstrip("/"))
    return out
