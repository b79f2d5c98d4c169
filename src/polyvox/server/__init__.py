"""HTTP layer: OpenAI protocol models, routes, streaming, admission control and metrics."""
