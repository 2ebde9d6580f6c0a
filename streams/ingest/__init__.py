"""① Ingest: ``chat.messages`` (and sub-agent traffic) into MySQL rows, Redis
lists and the session table. Open ``processor.py`` first.
"""
