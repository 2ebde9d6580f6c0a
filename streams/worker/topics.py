"""Topic declarations. Values are raw bytes: records are decoded (and bad ones
dead-lettered with their original bytes) by memstream itself."""

from __future__ import annotations

from streams.worker.app import app, settings

_k = settings.kafka

chat_messages = app.topic(
    _k.chat_topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)
subagent_chat = app.topic(
    _k.subagent_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
    value_serializer="raw", partitions=_k.partitions, internal=True,
)
idle_checks = app.topic(
    _k.idle_topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw",
    partitions=_k.partitions, internal=True,
)
# the ingest agent reads all three; they are co-partitioned by conversation
chat_sources = app.topic(
    _k.chat_topic, _k.subagent_topic, _k.idle_topic,
    key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw",
)
dead_letters = app.topic(
    _k.dlq_topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw",
    partitions=_k.partitions, internal=True,
)
session_closed = app.topic(
    _k.session_closed_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
    value_serializer="raw", partitions=_k.partitions, internal=True,
)
retry = app.topic(
    _k.retry_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
    value_serializer="raw", partitions=_k.partitions, internal=True,
)
# compacted, one partition: the changelog of the agent-config global table,
# produced to by `memstream agent-config set` (or any upstream) directly
agent_config = app.topic(
    _k.agent_config_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
    value_serializer="raw", partitions=1, compacting=True, internal=True,
)
# compacted, one partition: erasure requests, carried out one after the other
erasures = app.topic(
    _k.erasures_topic, key_type=bytes, value_type=bytes, key_serializer="raw",
    value_serializer="raw", partitions=1, compacting=True, internal=True,
)
# memory.queries is not declared here: the query consumer reads it outside Faust
