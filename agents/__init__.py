"""Faust agents: thin loops over topics that call into ``streams``."""
