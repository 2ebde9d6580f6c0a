"""Pure rules of the ingest stage."""
