"""`VoicePromptCache`: encoded reference clips (VAE latents) kept by content hash and padding, least
recently used first out, so a voice used again is not encoded again; requests that bring the same new
clip at once wait for one encode."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import torch

from polyvox.engine.stats import PromptCacheStats

Key = tuple[str, str]  # (content hash, padding)


class VoicePromptCache:
    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[Key, torch.Tensor] = OrderedDict()
        self._lock = threading.Lock()
        self._encoding: dict[Key, threading.Lock] = {}
        self.encodes = 0  # clips encoded (misses)
        self.hits = 0

    def stats(self) -> PromptCacheStats:
        return PromptCacheStats(encodes=self.encodes, hits=self.hits)

    def get_or_encode(self, key: Key, encode: Callable[[], torch.Tensor]) -> torch.Tensor:
        cached = self._get(key)
        if cached is not None:
            return cached
        with self._lock:
            encoding = self._encoding.setdefault(key, threading.Lock())
        with encoding:
            cached = self._get(key)
            if cached is not None:
                return cached
            feats = encode()
            with self._lock:
                self.encodes += 1
                self._entries[key] = feats
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
                self._encoding.pop(key, None)
        return feats

    def _get(self, key: Key) -> torch.Tensor | None:
        with self._lock:
            feats = self._entries.get(key)
            if feats is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return feats
