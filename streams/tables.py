"""Table declarations."""

from __future__ import annotations

from streams.app import app

# tenant/conversation -> SessionState as JSON (see streams.domain.session_state)
sessions = app.Table(
    "sessions",
    default=None,
    key_type=str,
    help="Per-conversation session state.",
)
