"""The server's life: draining on SIGTERM, back-end supervision, health, readiness and shared state."""
