"""Pure domain logic: no Kafka, Redis, SQL or HTTP imports; time and collaborators come in as
arguments.
"""
