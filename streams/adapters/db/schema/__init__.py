"""Database tables (SQLAlchemy Core), shared by MySQL and the embedded SQLite."""
