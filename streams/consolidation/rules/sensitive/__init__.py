"""Sensitive content in what is about to become long-term memory.

``kinds`` names what can be found (a closed set) and a finding's span;
``policy`` decides per kind what happens to a memory holding it (keep, mask,
drop) and applies that to a text; ``patterns`` are the recognizers memstream
writes itself (Chinese resident ids, credentials stated as such) and the
view of a text its pattern recognizers read. All of it is pure: the
library-backed detector that produces findings is an adapter behind the
consolidation port ``SensitiveDetector`` (``streams.adapters.sensitive``).
"""
