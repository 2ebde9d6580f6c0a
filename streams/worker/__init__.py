"""The worker process: the only package of ``streams`` that imports Faust or
mode, and the one composition root. Open ``wiring.py`` first, then
``context.py`` (the worker's one instance, which the agents call).
"""
