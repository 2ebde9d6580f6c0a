"""Durable storage: SQLAlchemy Core on MySQL (aiomysql) or the embedded SQLite (aiosqlite)."""
