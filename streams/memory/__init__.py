"""④ Long-term memory: the provider contract and its error tree, the registry
of configured providers, routing by agent configuration, and the providers
(built-in, MemOS, Mem0). Open ``provider.py`` first.
"""
