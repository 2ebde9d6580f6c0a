"""The BEAM benchmark: agent conversations (a person and an assistant) through Kafka."""
