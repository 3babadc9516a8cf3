"""From facts to alerts: episodes (for / keep_firing_for / repeat), built-in alerts, health,
silences, routing, templating, wording and number formatting, and the commit path's stages
(word -> route -> silence)."""
