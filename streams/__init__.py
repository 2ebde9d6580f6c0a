"""memstream: a Kafka-native memory service for AI agents."""

__version__ = "0.1.0"
