"""Pure rules of the session stage: the batch plan, the token window, stale marks,
when a state is due for an idle check."""
