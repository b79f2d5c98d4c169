"""One request inside the engine: its prompt, generated patches, KV block table and sampling state."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from enum import Enum, auto
from typing import Protocol, overload

import torch

from polyvox.models.lora.bank import AdapterUse


class PromptLike(Protocol):
    """What the engine reads of a built prompt (models/prompt.py's `Prompt`)."""

    tokens: torch.Tensor  # Long[T]
    text_mask: torch.Tensor  # [T]
    audio_mask: torch.Tensor  # [T]
    feats: torch.Tensor  # [T, P, D]
    context_patches: torch.Tensor  # [C, P, D] prompt audio tail the VAE decode is primed with (C may be 0)


class PatchHistory:
    """A sequence's generated patches `[P, D]` in order, each kept as its step's `[B, P, D]` batch
    tensor and its row there: appending one costs two list appends, not a tensor object per row and
    step (which the garbage collector would walk for as long as the request lives)."""

    __slots__ = ("_rows", "_sources")

    def __init__(self) -> None:
        self._sources: list[torch.Tensor] = []
        self._rows: list[int] = []  # -1: the source is the patch itself

    def append(self, patch: torch.Tensor, row: int = -1) -> int:
        """Add `patch` `[P, D]`, or with `row`, that row of a step's patches `[B, P, D]`; its index."""
        self._sources.append(patch)
        self._rows.append(row)
        return len(self._rows) - 1

    def source(self, index: int) -> tuple[torch.Tensor, int]:
        """Patch `index` as (tensor, row), the row -1 when the tensor is the patch itself."""
        return self._sources[index], self._rows[index]

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> torch.Tensor: ...

    @overload
    def __getitem__(self, index: slice) -> list[torch.Tensor]: ...

    def __getitem__(self, index: int | slice) -> torch.Tensor | list[torch.Tensor]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        source, row = self._sources[index], self._rows[index]
        return source if row < 0 else source[row]


class SequenceStatus(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


@dataclass(slots=True)
class SamplingParams:
    """Per-request generation settings; `min_len`/`max_len` count patches (160 ms each)."""

    cfg_value: float = 2.0
    inference_timesteps: int = 10
    temperature: float = 1.0
    seed: int | None = None
    min_len: int = 2
    max_len: int = 2000
    adapter: str | None = None  # a registered LoRA adapter's name

    def __post_init__(self) -> None:
        if self.max_len < 1:
            raise ValueError("max_len must be at least 1")
        if self.inference_timesteps < 1:
            raise ValueError("inference_timesteps must be at least 1")


class Sequence:
    """A request's whole engine-side state.

    Positions `0..num_prompt_tokens` are the prompt; position `num_prompt_tokens + k` is generated
    patch `k` fed back into the LMs. `num_computed` positions have KV in the cache; when
    `num_computed == num_tokens` the sequence's hidden states are ready for its next patch.
    """

    _ids = itertools.count()

    def __init__(
        self,
        prompt: PromptLike,
        params: SamplingParams,
        block_size: int,
        request_id: str = "",
        adapter: AdapterUse | None = None,
    ):
        self.seq_id = next(Sequence._ids)
        self.request_id = request_id or str(self.seq_id)
        self.status = SequenceStatus.WAITING
        self.params = params
        self.block_size = block_size
        self.adapter = adapter  # its LoRA slot, held until it finishes
        self.tokens = prompt.tokens.detach().to("cpu", torch.long).reshape(-1)
        self.text_mask = prompt.text_mask.detach().to("cpu", torch.float32).reshape(-1)
        self.audio_mask = prompt.audio_mask.detach().to("cpu", torch.float32).reshape(-1)
        self.feats = prompt.feats.detach().to("cpu", torch.float32)
        context = prompt.context_patches
        self.context_patches = context.detach().cpu().float() if len(context) else None
        self.num_prompt_tokens = int(self.tokens.numel())
        if self.num_prompt_tokens == 0:
            raise ValueError("empty prompt")
        self.patches = PatchHistory()
        self.num_computed = 0
        self.block_table: list[int] = []
        self.num_hashed_blocks = 0
        self.block_hashes = self._prompt_block_hashes()
        # The engine gives every request its seed (`EngineRequest`); a direct user of the core (a test)
        # that gives none samples with 0.
        self.seed = params.seed if params.seed is not None else 0
        self.generator = torch.Generator().manual_seed(self.seed)  # its CFM noise (core/noise.py)
        self.noise_slot: int | None = None  # the model runner's noise bank slot
        self.vae_slot: int | None = None  # the model runner's streaming-decoder state slot
        self.num_preemptions = 0
        self.finish_reason: str | None = None
        self.first_output_at: float | None = None  # engine clock when its first patch came out

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + len(self.patches._rows)  # read per row and step: no __len__ call

    @property
    def num_blocks(self) -> int:
        return (self.num_tokens + self.block_size - 1) // self.block_size

    def audio_ahead_s(self, now: float, patch_s: float) -> float | None:
        """How far its audio runs ahead of real-time playback begun at its first patch (None before)."""
        if self.first_output_at is None:
            return None
        return len(self.patches) * patch_s - (now - self.first_output_at)

    @property
    def adapter_slot(self) -> int:
        return self.adapter.slot if self.adapter is not None else 0

    @property
    def prev_patch(self) -> torch.Tensor:
        """The DiT's conditioning patch: the last generated one, else the prompt's last position."""
        return self.patches[-1] if self.patches else self.feats[-1]

    def _prompt_block_hashes(self) -> list[bytes]:
        """Hash chain over the prompt's full blocks: token ids, masks and audio-feature bytes, after the
        adapter's digest (an adapter changes the K/V of the same prompt)."""
        hashes, prev = [], self.adapter.digest if self.adapter is not None else b""
        bs = self.block_size
        for start in range(0, self.num_prompt_tokens - bs + 1, bs):
            h = hashlib.blake2b(prev, digest_size=16)
            h.update(self.tokens[start : start + bs].numpy().tobytes())
            h.update(self.text_mask[start : start + bs].numpy().tobytes())
            h.update(self.audio_mask[start : start + bs].numpy().tobytes())
            h.update(self.feats[start : start + bs].contiguous().numpy().tobytes())
            prev = h.digest()
            hashes.append(prev)
        return hashes

    def reset_for_recompute(self) -> None:
        """Forget the KV (preempted): the prompt and generated patches will be prefilled again."""
        self.block_table = []
        self.num_computed = 0
        self.num_hashed_blocks = 0
        self.status = SequenceStatus.WAITING
        self.num_preemptions += 1

    def __repr__(self) -> str:
        return (
            f"Sequence(id={self.seq_id}, status={self.status.name}, tokens={self.num_tokens}, "
            f"computed={self.num_computed}, patches={len(self.patches)})"
        )
