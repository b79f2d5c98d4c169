"""The prompt limits both sides of the engine know: the longest speech a request may ask for, the input a
voice must leave room to say, the voice prompt cache's default size. Plain values, without PyTorch: the
API side checks requests and voices with them in a process that never loads a model."""

from __future__ import annotations

DEFAULT_MAX_PATCHES = 2000
SHORTEST_INPUT = "a"  # what a voice must leave room to say, at the least
DEFAULT_MIN_PATCHES = 2
REFERENCE_CACHE_SIZE = 64
