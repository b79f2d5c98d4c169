"""HTTP routers, one per concern: speech, models and voices, health and metrics."""
