"""⑤ Memory lookups over Kafka: the engine that assembles a reply (recent
history plus ranked long-term memories within a token budget), the processor
that turns one request record into one reply, and the query consumer that
reads ``memory.queries`` in a consumer group of its own. Open ``engine.py``
first; the records and headers are in :mod:`streams.wire`."""
