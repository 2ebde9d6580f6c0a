"""Technology adapters, one package per technology, with no business rules."""
