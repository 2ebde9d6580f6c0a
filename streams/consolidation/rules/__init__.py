"""Pure rules of consolidation: judges, dedup, conflicts, summaries."""
