"""Kafka: bootstrap addresses, topic administration, plain aiokafka clients, publishing,
dead letters, replay and consumer progress.
"""
