"""The messages between the API server and an engine process (msgpack through msgspec). Audio crosses as
raw float32 PCM (a step's audio as one frame beside its message), never as pickled tensors. A client
names its requests with its own `key`s; the engine answers each client on the socket identity it came
from, so several clients can share one."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from polyvox.core.stats import BatchingStats
from polyvox.engine.request import EngineRequest, decode_hook, encode_hook
from polyvox.engine.stats import PromptCacheStats
from polyvox.runtime import otel

# --------------------------------------------------------------------- client -> engine


class Generate(msgspec.Struct, frozen=True, tag="generate"):
    """A request for the engine; `key` names it between this client and the engine. `trace`: the W3C
    trace context of the span sending it (otel_traces), taken where the message is made, so the
    engine's spans of the request join its trace (`request_spans.py`); empty when nothing is traced."""

    key: int
    request: EngineRequest
    trace: dict[str, str] = msgspec.field(default_factory=otel.current_context)


class Abort(msgspec.Struct, frozen=True, tag="abort"):
    """The client is gone: free the request's KV blocks before the next step."""

    key: int


class Hello(msgspec.Struct, frozen=True, tag="hello"):
    """A client connects; the engine answers with its start-up stage, then `Ready` or `StartFailed`."""


class Shutdown(msgspec.Struct, frozen=True, tag="shutdown"):
    """Stop now: the engine exits (the API server drained its requests first)."""


class ControlCall(msgspec.Struct, frozen=True, tag="control"):
    """A call on the engine's worker by name (e.g. load or unload an adapter), sent to every rank."""

    call_id: int
    method: str
    args: dict[str, Any] = {}


class Forget(msgspec.Struct, frozen=True, tag="forget"):
    """A client is gone (an API process that died): the engine drops its requests and stops telling it."""

    peer: bytes


ToEngine = Generate | Abort | Hello | Shutdown | ControlCall | Forget

# --------------------------------------------------------------------- engine -> client


class Stage(msgspec.Struct, frozen=True, tag="stage"):
    """The start-up stage running in the engine now (None: between stages)."""

    name: str | None


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    """The handshake: the engine is serving."""

    pid: int
    device: str
    num_kv_blocks: int
    kv_block_size: int
    restarts: int = 0  # how many times this rank's process was started again after dying
    torch_threads: int = 0  # PyTorch's intra-op threads on the thread that steps


class StartFailed(msgspec.Struct, frozen=True, tag="start_failed"):
    message: str


class Chunk(msgspec.Struct, frozen=True, array_like=True):
    """One 160 ms patch of one request: row `row` of the step's audio frame."""

    key: int
    index: int
    finished: bool
    row: int


class Outputs(msgspec.Struct, frozen=True, tag="outputs"):
    """One step's patches for one client, with the engine's counters after it. The message has a second
    frame: the step's audio for this client, `[rows, samples]` mono float32 PCM at the model's output
    rate (the chunks name their rows; an empty frame when the step made none for it), sent without a copy
    when one client has every row."""

    chunks: list[Chunk]
    stats: BatchingStats
    prompts: PromptCacheStats
    samples: int = 0  # per row
    held: int = 0  # requests the engine holds for every client (being prepared, waiting or running)


class Stats(msgspec.Struct, frozen=True, tag="stats"):
    """The engine's counters when no step reports them (idle, after an abort)."""

    stats: BatchingStats
    prompts: PromptCacheStats
    held: int = 0


ErrorKind = Literal["input", "overloaded", "failed"]


class Failed(msgspec.Struct, frozen=True, tag="failed"):
    """A request failed: `input` (its prompt cannot be served; param and code name why, a 422),
    `overloaded` (the engine cannot take it now, e.g. every LoRA adapter slot is pinned: a 429 to retry)
    or `failed` (the step running it failed; the engine goes on with the others)."""

    key: int
    kind: ErrorKind
    message: str
    param: str | None = None
    code: str = "unsupported_input"


class ControlReply(msgspec.Struct, frozen=True, tag="control_reply"):
    call_id: int
    result: Any = None
    error: str | None = None


FromEngine = Stage | Ready | StartFailed | Outputs | Stats | Failed | ControlReply

to_engine = msgspec.msgpack.Decoder(ToEngine, dec_hook=decode_hook)
from_engine = msgspec.msgpack.Decoder(FromEngine)
encode = msgspec.msgpack.Encoder(enc_hook=encode_hook).encode
