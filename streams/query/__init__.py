"""⑤ Memory lookups over Kafka: the engine that assembles a reply (recent
history plus ranked long-term memories within a token budget), the processor
that turns one request record into one reply, and the answering of one request
(:mod:`.answering`: not twice, nor after its caller gave up). Open ``engine.py``
first; the records and headers are in :mod:`streams.wire`, what the stage needs
from outside in :mod:`.ports`; the consumer of ``memory.queries`` is an adapter
(:mod:`streams.adapters.kafka.query_consumer`)."""
