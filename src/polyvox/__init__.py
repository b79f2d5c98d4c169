"""polyvox: a self-hosted, OpenAI-compatible text-to-speech server."""

__version__ = "0.1.0"
