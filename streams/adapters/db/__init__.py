"""Durable storage: SQLAlchemy Core on MySQL (aiomysql) or the embedded SQLite
(aiosqlite); the schema under ``schema/``, every store beside it.
"""
