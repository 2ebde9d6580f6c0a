"""Pure rules of the session stage: the batch plan, the token window, stale marks."""
