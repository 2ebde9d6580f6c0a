"""The built-in provider: MySQL (or SQLite) with hybrid retrieval."""
