"""Memory lookups over Kafka: request/reply records, Spring-compatible headers,
the engine that assembles a reply, and the processor the query agent calls."""
