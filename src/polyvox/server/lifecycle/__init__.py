"""The server's life: draining on SIGTERM, back-end supervision, loading on demand and the warm-up."""
