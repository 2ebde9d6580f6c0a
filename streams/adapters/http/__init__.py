"""HTTP plumbing shared by the external clients, and the OpenAI-compatible model."""
