"""② Session memory: per-conversation state (``model.py``), the token window,
idle closes and the read path of recent history. Open ``model.py`` first.
"""
