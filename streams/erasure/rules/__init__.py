"""Pure rules of erasure: what an erasure covers."""
