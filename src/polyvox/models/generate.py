"""Batch-1 generation on top of the batched-inference API (prefill / decode_patch / stop_logits /
advance) with a private one-sequence paged KV cache, so it shares the engine's numerics."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from polyvox.models.layers.attention import AttentionMetadata
from polyvox.models.prompt import Prompt
from polyvox.models.speech_lm import SpeechLM

BLOCK_SIZE = 16


def capped_max_len(prompt: Prompt, max_len: int, ratio: float = 6.0) -> int:
    """The reference's cap on generation length: `target text tokens × ratio + 10`."""
    return min(int(prompt.target_text_len * ratio + 10), max_len)


@torch.inference_mode()
def generate_latents(
    model: SpeechLM,
    prompt: Prompt,
    *,
    cfg_value: float = 2.0,
    inference_timesteps: int = 10,
    temperature: float = 1.0,
    min_len: int = 2,
    max_len: int = 2000,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    noise: torch.Tensor | None = None,
    max_len_ratio: float | None = None,
    adapter_slot: int | None = None,
) -> Iterator[torch.Tensor]:
    """Yield the generated latent patches `[P, D]` one at a time.

    Noise is standard normal `[1, D, P]` per patch, drawn in order from `generator` (or a CPU
    generator seeded with `seed`), or taken from `noise [T, D, P]`; it is scaled by `temperature`.
    Generation stops after patch `i` when `i > min_len` and the stop head says so, or at
    `max_len` (capped by the text length when `max_len_ratio` is given). `adapter_slot`: the slot of a
    resident LoRA adapter in `model.lora` to speak with.
    """
    if max_len_ratio is not None:
        max_len = capped_max_len(prompt, max_len, max_len_ratio)
    if generator is None and noise is None:
        generator = torch.Generator()
        if seed is None:
            generator.seed()
        else:
            generator.manual_seed(seed)
    device, dtype = model.device, model.dtype
    shape = (model.feat_dim, model.patch_size)

    n_prompt = len(prompt)
    num_blocks = (n_prompt + max_len + BLOCK_SIZE - 1) // BLOCK_SIZE
    table = [list(range(num_blocks))]
    base_kv, res_kv = model.make_kv_caches(num_blocks, BLOCK_SIZE)
    meta = AttentionMetadata.build([0], [n_prompt], table, BLOCK_SIZE, device)
    adapters = None if adapter_slot is None else torch.tensor([adapter_slot], device=device)
    lm_hidden, residual_hidden = model.prefill(
        prompt.tokens.to(device),
        prompt.text_mask.to(device),
        prompt.audio_mask.to(device),
        prompt.feats.to(device, dtype),
        meta,
        base_kv,
        res_kv,
        adapters,
    )
    prev_patch = prompt.prev_patch.to(device, dtype).unsqueeze(0)
    cfg = torch.tensor([cfg_value], device=device)
    for i in range(max_len):
        z = noise[i].unsqueeze(0) if noise is not None else torch.randn((1, *shape), generator=generator)
        z = (z * temperature).to(device, dtype)
        patch = model.decode_patch(
            lm_hidden, residual_hidden, prev_patch, z, cfg, inference_timesteps, adapters
        )
        yield patch[0]
        stop = int(model.stop_logits(lm_hidden, adapters).argmax(dim=-1)[0])
        if (i > min_len and stop == 1) or i == max_len - 1:
            return
        meta = AttentionMetadata.build([n_prompt + i], [1], table, BLOCK_SIZE, device)
        lm_hidden, residual_hidden = model.advance(patch, meta, base_kv, res_kv, adapters)
        prev_patch = patch


def generate_latent_sequence(model: SpeechLM, prompt: Prompt, **kwargs) -> torch.Tensor:
    """All generated latents as one `[D, T*P]` sequence (prompt context excluded)."""
    patches = list(generate_latents(model, prompt, **kwargs))
    return torch.stack(patches).flatten(0, 1).transpose(0, 1)
