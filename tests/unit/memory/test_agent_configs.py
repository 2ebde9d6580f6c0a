"""Agent configurations as the consolidation reads them."""

from __future__ import annotations

from streams.memory.agent_configs import StaticAgentConfigs, TableAgentConfigs


def test_agent_configs_from_the_table_whatever_the_key_type() -> None:
    raw = b'{"long_memory_provider": "mem0", "open_long_memory": true, "model": "m"}'
    for key in (b"t1/a1", "t1/a1"):
        cfg = TableAgentConfigs({key: raw}).get("t1", "a1")
        assert cfg is not None and cfg.long_memory_provider == "MEM0" and cfg.open_long_memory
    assert TableAgentConfigs({b"t1/a1": b"{not json"}).get("t1", "a1") is None
    assert TableAgentConfigs({}).get("t1", "a1") is None
    assert TableAgentConfigs({}).get("bad/tenant", "a1") is None
    assert StaticAgentConfigs({("t1", "a1"): {"openLongMemory": True}}).get("t1", "a1") is not None
