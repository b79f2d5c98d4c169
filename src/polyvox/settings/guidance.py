"""The ranges of VoxCPM's generation parameters polyvox accepts, each defined once: classifier-free
guidance (`cfg_value`) and the flow-matching solver's steps (`inference_timesteps`). The speech request,
a stored voice, the server's default settings and the VoxCPM2 back end all check against them."""

from __future__ import annotations

CFG_VALUE_MIN = 0.5
CFG_VALUE_MAX = 5.0

INFERENCE_TIMESTEPS_MIN = 1
INFERENCE_TIMESTEPS_MAX = 100


def cfg_value_in_range(value: float) -> bool:
    return CFG_VALUE_MIN <= value <= CFG_VALUE_MAX


def inference_timesteps_in_range(value: int) -> bool:
    return INFERENCE_TIMESTEPS_MIN <= value <= INFERENCE_TIMESTEPS_MAX
