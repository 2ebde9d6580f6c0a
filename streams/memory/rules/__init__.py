"""Pure rules of long-term memory: routing, lexical scoring, fusion, MMR."""
