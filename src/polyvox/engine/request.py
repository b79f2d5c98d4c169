"""`EngineRequest`: one utterance as the engine takes it, with the voice clip it clones from
(`EngineReference`). The same structs serve the engine in a thread and cross to an engine process
(msgpack through msgspec: `encode_hook` and `decode_hook` carry a clip's samples as raw float32 bytes,
never a pickled array). The back end builds them from its own request at its edge."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import numpy as np


class EngineReference(msgspec.Struct, frozen=True, eq=False):
    """Mono float32 `samples` at `sample_rate` to clone a voice from, plus an optional transcript.
    `content_hash` identifies the clip by content (the voice prompt cache's and the router's key)."""

    samples: np.ndarray
    sample_rate: int
    content_hash: str
    transcript: str | None = None


class EngineRequest(msgspec.Struct, frozen=True):
    """What the engine uses of a request; None leaves a parameter to the engine's default. `lora` names
    a loaded adapter to speak with; `request_id` names the request, and `piece` which piece of its long
    input this is (None: the whole input): a request's pieces go to one rank. `seed` is never None once
    the request is made (see `__post_init__`)."""

    text: str
    instructions: str | None = None
    seed: int | None = None
    cfg_value: float | None = None
    inference_timesteps: int | None = None
    temperature: float = 1.0
    max_patches: int | None = None
    min_patches: int | None = None
    reference: EngineReference | None = None
    lora: str | None = None
    request_id: str = ""
    piece: int | None = None

    def __post_init__(self) -> None:
        # The server always sends a seed (fixed once per speech request, as it is prepared, and kept
        # when a piece is sent again: `backends/rerun.py`). A direct user of the engine (a bench script,
        # a test) may leave it out: the engine's one draw is here, as the request is made.
        if self.seed is None:
            msgspec.structs.force_setattr(self, "seed", random.getrandbits(31))


def encode_hook(value: Any) -> Any:
    """A clip's samples on the wire: raw float32 bytes."""
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value, dtype=np.float32).tobytes()
    raise NotImplementedError(f"{type(value).__name__} does not cross to an engine process")


def decode_hook(kind: type, value: Any) -> Any:
    if kind is np.ndarray:
        return np.frombuffer(value, dtype=np.float32).copy()  # writable, as torch wants it
    raise NotImplementedError(f"{kind.__name__} does not cross from an API process")
