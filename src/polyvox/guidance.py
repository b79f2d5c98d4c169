"""The range of classifier-free guidance (`cfg_value`) polyvox accepts, defined once: the speech
request, a stored voice, the server's default setting and the VoxCPM2 back end all check against it."""

from __future__ import annotations

CFG_VALUE_MIN = 0.5
CFG_VALUE_MAX = 5.0


def cfg_value_in_range(value: float) -> bool:
    return CFG_VALUE_MIN <= value <= CFG_VALUE_MAX
