"""Table declarations."""

from __future__ import annotations

from streams.worker.app import app
from streams.worker.faust_glue import partitioned_table, topic_global_table
from streams.worker.topics import agent_config

# tenant/conversation -> SessionState as JSON (see streams.session.model); a worker
# keeps no state of a partition revoked from it
sessions = partitioned_table(app, "sessions", key_type=str,
                             help="Per-conversation session state.")

# "{tenant}/{agent}" -> raw JSON bytes (streams.memory.rules.routing.parse_agent_config).
# The compacted memory.agent-config topic *is* the changelog: producers write to
# it, every worker reads all of it. Never written here.
agent_configs = topic_global_table(
    app, "agent-config", topic=agent_config,
    help="Agent memory configuration (long-term provider, long memory on/off, model).",
)
