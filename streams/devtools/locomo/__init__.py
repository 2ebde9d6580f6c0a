"""The LoCoMo long-term conversational memory benchmark, run through Kafka."""
