"""From facts to alerts: alert values, episodes (for / keep_firing_for / repeat), built-in
alerts, health, silences, routing, wording (presentation) and the rule registry."""
