"""Long-term memory providers: built-in (MySQL), MemOS and Mem0."""
