"""What this server shares with the others serving the same voices: `state_url` (this replica's sync
with Redis, and the guard on routes that change shared state) and read-your-writes across servers."""
