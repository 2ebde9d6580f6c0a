"""Sensitive-content detection backed by the field's libraries, offline.

``structured`` (Microsoft Presidio's pattern recognizers), ``secrets``
(detect-secrets' credential patterns) and ``names`` (a spaCy NER model, only
when a policy asks for names or places) each turn a text into findings;
``scanner`` composes them with memstream's own recognizers
(``streams.consolidation.rules.sensitive.patterns``) into the consolidation
port ``SensitiveDetector``. Why these libraries and not others, and what
each costs: ``scanner``'s docstring.
"""
