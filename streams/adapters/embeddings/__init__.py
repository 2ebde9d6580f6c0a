"""Text embedders for dense retrieval."""
