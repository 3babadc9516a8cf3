"""State in SQLite: the file and its migrations, and the queries (target state, deliveries,
silences, history). Pure code never imports from here."""
