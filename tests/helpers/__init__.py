"""Shared test helpers: a real uvicorn server on loopback, audio decoding, ASR."""
