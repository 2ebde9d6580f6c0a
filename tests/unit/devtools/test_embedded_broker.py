"""KRaft cluster ids for the storage tool."""

from __future__ import annotations

import base64
import uuid

import pytest

from streams.devtools.embedded_broker import new_cluster_id


def test_a_cluster_id_is_a_base64_uuid_never_read_as_an_option(
        monkeypatch: pytest.MonkeyPatch) -> None:
    dash = uuid.UUID(bytes=b"\xf8" + bytes(15))  # encodes as "-AAAA..."
    plain = uuid.UUID(bytes=b"\x10" + bytes(15))
    drawn = iter([dash, dash, plain])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(drawn))
    cid = new_cluster_id()
    assert cid == base64.urlsafe_b64encode(plain.bytes).decode().rstrip("=")
    assert len(cid) == 22 and not cid.startswith("-")
