"""Pure rules of the query stage: the token budget and the search text."""
