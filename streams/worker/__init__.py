"""The worker process: the only package that imports Faust or mode, and the
one composition root. Open ``context.py`` first.
"""
