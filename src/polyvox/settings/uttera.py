"""uttera-tts-vllm's `CACHE_TTL_MINUTES`, read as that system reads it.

There, 0 (or less) turns the audio cache off entirely, a choice made for privacy; polyvox's own
`cache_ttl_minutes` reads 0 as "never expire". So uttera-tts-vllm's name is not a plain alias: a
positive value sets the TTL, 0 or less sets `cache_enabled` false. It is only a fallback: when
polyvox's own `cache_ttl_minutes` is given anywhere (flag, `POLYVOX_CACHE_TTL_MINUTES`, config file),
uttera-tts-vllm's name is not read at all. Its other names mean what polyvox's settings mean and
are plain aliases (`fields.py`).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

UTTERA_CACHE_TTL = "CACHE_TTL_MINUTES"
_OWN_NAMES = {"cache_ttl_minutes", "polyvox_cache_ttl_minutes"}


def uttera_cache_ttl() -> float | None:
    """uttera-tts-vllm's `CACHE_TTL_MINUTES` from the environment; None when unset, empty or not a number."""
    raw = os.environ.get(UTTERA_CACHE_TTL, "").strip()
    try:
        return float(raw) if raw else None
    except ValueError:
        return None


def uttera_turns_cache_off() -> bool:
    """Whether the environment turns the cache off as uttera-tts-vllm does (`CACHE_TTL_MINUTES<=0`)."""
    ttl = uttera_cache_ttl()
    return ttl is not None and ttl <= 0


class UtteraCacheTTLSource(PydanticBaseSettingsSource):
    """`CACHE_TTL_MINUTES` as settings values, unless one of `own_sources` gives `cache_ttl_minutes`."""

    def __init__(self, settings_cls: type[BaseSettings], *own_sources: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self.own_sources = own_sources

    def get_field_value(self, field, field_name):  # pragma: no cover - not used by __call__
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        raw = os.environ.get(UTTERA_CACHE_TTL, "").strip()
        if not raw or any(_OWN_NAMES & {k.lower() for k in source()} for source in self.own_sources):
            return {}
        if uttera_turns_cache_off():
            return {"cache_enabled": False}
        return {"cache_ttl_minutes": raw}  # a bad number is refused by the field, as any other value
