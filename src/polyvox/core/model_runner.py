"""Runs one engine step on the model: the packed LM forward for every scheduled chunk, then the LocDiT
CFM solve, stop head and streaming VAE decode for every sequence whose context is complete.

Owns the two paged KV pools (base LM and residual LM, one block table per sequence for both), sizes
them from memory, and keeps per-request state that lives on the device (hidden states, VAE state).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from polyvox.core.block_tables import BlockTableArray
from polyvox.core.compile import compile_step_modules
from polyvox.core.config import BatchingConfig
from polyvox.core.errors import EngineInputError, EngineOverloaded
from polyvox.core.graphs import AdvanceGraphs, DiTGraphs
from polyvox.core.noise import NoiseBank
from polyvox.core.scheduler import ScheduledChunk
from polyvox.core.sequence import Sequence
from polyvox.core.vae_graphs import VAEDecodeGraphs
from polyvox.core.vae_state_pool import VAEStatePool
from polyvox.models.interface import (
    AttentionMetadata,
    AudioVAE,
    LMConfig,
    PagedKVCache,
    SpeechConfig,
    SpeechLM,
    compare_backends,
    device_tensor,
    to_device,
    use_backend,
)
from polyvox.models.lora.bank import AdapterUse, SlotsBusy

log = logging.getLogger(__name__)
FLASH_TOLERANCE = 5e-2  # flash-attn vs SDPA on random fp16/bf16 inputs of unit scale


@dataclass(slots=True)
class StepPatches:
    """What a step produced, one row per sequence whose context was complete: the patch latents
    `[B, P, D]` (on the device), their audio `[B, samples]` (float32, on the host), the stop head's votes."""

    seqs: list[Sequence]
    patches: torch.Tensor
    audio: np.ndarray
    stops: list[bool]


@dataclass(slots=True)
class _RowConstants:
    """What a step's rows need that stays the same while the rows do (in steady decode, step after
    step): built once per change of rows instead of from every sequence at every step."""

    seqs: list[Sequence]
    temperature: torch.Tensor  # [B, 1, 1], host
    cfg: torch.Tensor  # [B], device
    adapters: torch.Tensor | None
    noise_slots: np.ndarray  # Long[B], each row's slot in the noise bank
    vae_slots: list[int] | None = None  # once each row holds a decoder state slot
    vae_slot_tensor: torch.Tensor | None = None


@dataclass(slots=True)
class _LastStep:
    """The rows that got a patch in the last step, in order: in steady decode the next step's rows are
    the same, each feeding back the patch it just got, which is then `patches` itself."""

    seqs: list[Sequence]
    ends: np.ndarray  # Long[B] each row's KV positions after the step (its chunk's end)
    patches: torch.Tensor  # [B, P, D]

    def continued_by(self, seqs: list[Sequence], starts: np.ndarray, ends: np.ndarray) -> bool:
        """Whether a step's chunks are these rows, in order, each feeding the patch it just got: its
        chunk starts where the last one ended (the new patch's position) and adds that one position."""
        return (
            seqs == self.seqs  # the same Sequence objects (compared by identity), in order
            and np.array_equal(starts, self.ends)
            and np.array_equal(ends, self.ends + 1)
        )

    def patches_fed(self, seqs: list[Sequence], rows: np.ndarray, starts: np.ndarray) -> torch.Tensor | None:
        """The patches `seqs[rows]` feed back `[len(rows), P, D]` when each is the one it got in the last
        step (its chunk starts where that step's ended): one gather of `patches`. Else None."""
        last_row = dict(zip(map(id, self.seqs), range(len(self.seqs)), strict=True))
        found = map(last_row.get, map(id, seqs), itertools.repeat(-1))
        source = np.fromiter(found, np.int64, len(seqs))[rows]
        if (source < 0).any() or not np.array_equal(self.ends[source], starts[rows]):
            return None
        return self.patches.index_select(0, device_tensor(source, torch.long, self.patches.device))


class ModelRunner:
    def __init__(
        self,
        lm: SpeechLM,
        vae: AudioVAE,
        model_config: SpeechConfig,
        config: BatchingConfig,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.lm = lm
        self.vae = vae
        self.model_config = model_config
        self.config = config
        self.device = torch.device(device)
        self.dtype = dtype
        self.block_size = config.kv_block_size
        self.patch_size = model_config.patch_size
        self.feat_dim = model_config.feat_dim
        lm_cfg = model_config.lm_config
        self.kv_shape: dict[str, Any] = dict(
            block_size=self.block_size,
            num_kv_heads=lm_cfg.num_key_value_heads,
            head_dim=lm_cfg.head_dim,
            dtype=dtype,
        )
        self.base_layers = lm_cfg.num_hidden_layers
        self.attention_backend = self._choose_attention(config.attention_backend, lm_cfg)
        self.res_layers = model_config.residual_lm_num_layers
        self.num_kv_blocks = config.num_kv_blocks or self._blocks_from_memory()
        # one more block than the block manager hands out: the scratch block padded graph rows write to
        pool_blocks = self.num_kv_blocks + 1
        self.base_kv = PagedKVCache(self.base_layers, pool_blocks, device=self.device, **self.kv_shape)
        self.res_kv = PagedKVCache(self.res_layers, pool_blocks, device=self.device, **self.kv_shape)
        vae_param = next(vae.parameters())
        self.vae_pool = VAEStatePool(vae, config.max_num_seqs, vae_param.device, vae_param.dtype)
        self.noise = NoiseBank(self.feat_dim, self.patch_size, config.max_num_seqs)
        self.timings: dict[str, float] | None = None  # set to {} to accumulate seconds per phase
        self._rows: _RowConstants | None = None  # the last step's
        self._last: _LastStep | None = None
        self._decode_tables = BlockTableArray()
        self.compiled = compile_step_modules(lm, vae, config.compile)
        use_graphs = config.cuda_graphs and self.device.type == "cuda"
        self.graphs = DiTGraphs(lm, config.max_graph_batch) if use_graphs else None
        self.advance_graphs = (
            AdvanceGraphs(
                lm,
                self.base_kv,
                self.res_kv,
                self.block_size,
                self.num_kv_blocks,
                config.max_graph_batch,
                True,
            )
            if use_graphs
            else None
        )
        self.vae_graphs = (
            VAEDecodeGraphs(vae, self.vae_pool, config.max_graph_batch, True)
            if use_graphs and self.vae_pool.device.type == "cuda"
            else None
        )

    def _choose_attention(self, requested: str, lm_cfg: LMConfig) -> str:
        """The paged-attention backend in effect on this device; flash-attn only if it agrees with SDPA."""
        backend = use_backend(requested)
        if backend == "flash" and not (
            self.device.type == "cuda" and self.dtype in (torch.float16, torch.bfloat16)
        ):
            backend = "sdpa"  # flash-attn takes CUDA fp16/bf16 only
        elif backend == "flash":
            heads = (lm_cfg.num_attention_heads, lm_cfg.num_key_value_heads, lm_cfg.head_dim)
            try:
                diff = compare_backends(self.device, self.dtype, *heads)
            except Exception as exc:  # e.g. a build without kernels for this GPU
                log.warning("flash-attn failed its start-up check (%s)", exc)
                diff = float("inf")
            if not diff <= FLASH_TOLERANCE:
                log.warning(
                    "flash-attn disagrees with SDPA (max diff %.3g); attention runs through SDPA", diff
                )
                backend = use_backend("sdpa")
        log.info("paged attention backend: %s", backend)
        return backend

    @property
    def bytes_per_block(self) -> int:
        return PagedKVCache.bytes_per_block(self.base_layers + self.res_layers, **self.kv_shape)

    def _blocks_from_memory(self) -> int:
        if self.device.type == "cuda":
            free, total = torch.cuda.mem_get_info(self.device)
            used_by_others = total - free
            budget = total * self.config.gpu_memory_utilization - used_by_others - self._activation_reserve()
        else:
            budget = self.config.cpu_kv_cache_bytes
        blocks = int(budget // self.bytes_per_block)
        if blocks < 1:
            msg = "no memory for the KV cache; raise gpu_memory_utilization or set num_kv_blocks"
            raise RuntimeError(msg)
        return blocks

    def _activation_reserve(self) -> int:
        """Room for a step's activations: the DiT's CFG batch dominates, plus the VAE decode."""
        hidden = self.model_config.lm_config.hidden_size
        rows = 2 * self.config.max_num_seqs * 11 + self.config.max_num_batched_tokens
        return (1 << 30) + rows * hidden * 64

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        if self.timings is None:
            yield
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        yield
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0

    # ------------------------------------------------------------------ step

    @torch.inference_mode()
    def run(self, chunks: list[ScheduledChunk]) -> StepPatches | None:
        """The step's new patches (None when no sequence's context is complete yet).

        The LMs give batch tensors, one row per chunk (the prefill chunks' rows first); the rows of
        the chunks that complete their sequence's context go on to the DiT, in chunk order. No step
        builds per-row tensors: in steady decode those rows are the advance's own, in order."""
        seqs = [c.seq for c in chunks]
        starts = np.array([c.start for c in chunks], dtype=np.int64)
        ends = np.array([c.end for c in chunks], dtype=np.int64)
        last, self._last = self._last, None  # set again once this step's patches are made
        if last is not None and last.continued_by(seqs, starts, ends):  # steady decode, most steps
            with self._phase("advance"):
                lm_hidden, res_hidden, prev = self._advance(chunks, starts, last.patches)
            return self._generate(seqs, lm_hidden, res_hidden, prev, ends)
        prompt_lens = np.array([s.num_prompt_tokens for s in seqs], dtype=np.int64)
        is_decode = ((ends - starts == 1) & (starts >= prompt_lens)).tolist()
        completes = (ends == prompt_lens + [len(s.patches) for s in seqs]).tolist()
        prefills = [c for c, d in zip(chunks, is_decode, strict=True) if not d]
        decodes = [c for c, d in zip(chunks, is_decode, strict=True) if d]
        parts = []
        if prefills:
            with self._phase("prefill"):
                parts.append(self._prefill(prefills))
        if decodes:
            decode_rows = np.flatnonzero(is_decode)
            fed = last.patches_fed(seqs, decode_rows, starts) if last is not None else None
            with self._phase("advance"):
                parts.append(self._advance(decodes, starts[decode_rows], fed))
        lm_hidden, res_hidden, prev = (torch.cat(p) if len(p) > 1 else p[0] for p in zip(*parts, strict=True))
        ready = [s for s, c in zip(seqs, completes, strict=True) if c]
        if not ready:
            return None
        if prefills or len(ready) < len(chunks):  # the LMs' rows are not the DiT's: pick them
            rows = []
            next_row = [0, len(prefills)]  # the next prefill row, the next decode row
            for c, d in zip(completes, is_decode, strict=True):
                if c:
                    rows.append(next_row[d])
                next_row[d] += 1
            index = device_tensor(rows, torch.long, self.device)
            lm_hidden, res_hidden, prev = lm_hidden[index], res_hidden[index], prev[index]
        return self._generate(ready, lm_hidden, res_hidden, prev, ends[np.flatnonzero(completes)])

    def _meta(self, chunks: list[ScheduledChunk]) -> AttentionMetadata:
        return AttentionMetadata.build(
            [c.start for c in chunks],
            [c.end - c.start for c in chunks],
            [c.seq.block_table for c in chunks],
            self.block_size,
            self.device,
        )

    def _prefill(self, chunks: list[ScheduledChunk]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each chunk's last hidden states of both LMs, and its sequence's previous patch (the DiT's
        condition if the chunk completes its context)."""
        tokens, text_mask, audio_mask, feats = [], [], [], []
        for c in chunks:
            seq, t = c.seq, c.seq.num_prompt_tokens
            p_end = min(c.end, t)
            if c.start < p_end:
                tokens.append(seq.tokens[c.start : p_end])
                text_mask.append(seq.text_mask[c.start : p_end])
                audio_mask.append(seq.audio_mask[c.start : p_end])
                feats.append(to_device(seq.feats[c.start : p_end], self.device, self.dtype))
            g_start = max(c.start, t)
            if g_start < c.end:
                n = c.end - g_start
                tokens.append(torch.zeros(n, dtype=torch.long))
                text_mask.append(torch.zeros(n))
                audio_mask.append(torch.ones(n))
                feats.append(torch.stack(seq.patches[g_start - t : c.end - t]).to(self.device, self.dtype))
        lm_hidden, res_hidden = self.lm.prefill(
            to_device(torch.cat(tokens), self.device),
            to_device(torch.cat(text_mask), self.device, self.dtype),
            to_device(torch.cat(audio_mask), self.device, self.dtype),
            torch.cat(feats),
            self._meta(chunks),
            self.base_kv,
            self.res_kv,
            self._adapters([c.seq for c in chunks]),
        )
        prev = torch.stack([to_device(c.seq.prev_patch, self.device, self.dtype) for c in chunks])
        return lm_hidden, res_hidden, prev

    def _advance(
        self, chunks: list[ScheduledChunk], starts: np.ndarray, fed: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Both LMs' hidden states after each chunk's one generated patch (`starts`: its position;
        `fed`: the patches, when known), and the patches fed (the DiT's previous-patch condition for
        the rows that complete their context)."""
        patches = (self._fed_patches(chunks) if fed is None else fed).to(self.device, self.dtype)
        tables = [c.seq.block_table for c in chunks]
        adapters = self._adapters([c.seq for c in chunks])
        if adapters is None and self.advance_graphs is not None:  # the graphs hold the base model only
            out = self.advance_graphs(patches, starts, tables)
            if out is not None:  # None: run eagerly (see cuda_graph.GraphSet)
                return out[0], out[1], patches
        table_array, table_lens = self._decode_tables.update(tables)
        meta = AttentionMetadata.from_arrays(
            starts, np.ones_like(starts), table_array, table_lens, self.block_size, self.device
        )
        lm_hidden, res_hidden = self.lm.advance(patches, meta, self.base_kv, self.res_kv, adapters)
        return lm_hidden, res_hidden, patches

    def _fed_patches(self, chunks: list[ScheduledChunk]) -> torch.Tensor:
        """The patch each chunk feeds back `[B, P, D]`: rows of one earlier step's patches, taken with
        one gather where they are; else stacked one by one."""
        tensors, rows = zip(
            *(c.seq.patches.source(c.start - c.seq.num_prompt_tokens) for c in chunks), strict=True
        )
        first = tensors[0]
        if min(rows) >= 0 and all(t is first for t in tensors):
            return first[device_tensor(rows, torch.long, first.device)]
        return torch.stack([t if r < 0 else t[r] for t, r in zip(tensors, rows, strict=True)])

    def _generate(
        self,
        seqs: list[Sequence],
        lm_hidden: torch.Tensor,
        res_hidden: torch.Tensor,
        prev: torch.Tensor,
        ends: np.ndarray,
    ) -> StepPatches:
        """The rows' patches and audio; `ends`: their chunks' ends."""
        rows = self._rows
        if rows is None or rows.seqs != seqs:  # compares identities: the same Sequence objects, in order
            temperature = torch.tensor([s.params.temperature for s in seqs]).view(-1, 1, 1)
            cfg = device_tensor([s.params.cfg_value for s in seqs], self.dtype, self.device)
            noise_slots = self._noise_slots(seqs)
            rows = self._rows = _RowConstants(seqs, temperature, cfg, self._adapters(seqs), noise_slots)
        noise = self.noise.take(seqs, rows.noise_slots)
        noise = to_device(noise * rows.temperature, self.device, self.dtype)
        cfg, adapters = rows.cfg, rows.adapters
        with self._phase("dit"):
            patches = self._solve(seqs, lm_hidden, res_hidden, prev, noise, cfg, adapters)
        stops = self.lm.stop_logits(lm_hidden, adapters).argmax(dim=-1)  # read after the decode is queued
        if self.config.decode_audio:
            with self._phase("vae"):
                audio = self._decode_audio(rows, patches).cpu().numpy()
        else:
            audio = np.zeros((len(seqs), 0), dtype=np.float32)
        self._last = _LastStep(seqs, ends, patches)
        return StepPatches(seqs, patches, audio, stops.bool().tolist())

    def _solve(
        self,
        seqs: list[Sequence],
        lm_hidden: torch.Tensor,
        res_hidden: torch.Tensor,
        prev: torch.Tensor,
        noise: torch.Tensor,
        cfg: torch.Tensor,
        adapters: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The LocDiT CFM solve, one call per distinct `inference_timesteps` among the sequences."""
        groups = sorted({s.params.inference_timesteps for s in seqs})
        if len(groups) == 1:
            return self._decode_patch(lm_hidden, res_hidden, prev, noise, cfg, groups[0], adapters=adapters)
        patches = torch.empty(len(seqs), self.patch_size, self.feat_dim, device=self.device, dtype=self.dtype)
        for steps in groups:
            idx = [i for i, s in enumerate(seqs) if s.params.inference_timesteps == steps]
            rows = device_tensor(idx, torch.long, self.device)
            args = (lm_hidden[rows], res_hidden[rows], prev[rows], noise[rows], cfg[rows])
            patches[rows] = self._decode_patch(
                *args, steps, adapters=None if adapters is None else adapters[rows]
            )
        return patches

    def _decode_patch(
        self,
        lm_hidden: torch.Tensor,
        res_hidden: torch.Tensor,
        prev: torch.Tensor,
        noise: torch.Tensor,
        cfg: torch.Tensor,
        steps: int,
        adapters: torch.Tensor | None = None,
    ) -> torch.Tensor:
        args = (lm_hidden, res_hidden, prev, noise, cfg)
        if adapters is not None:  # the graphs hold the base model only
            return self.lm.decode_patch(*args, steps, adapters)
        if self.graphs is not None:
            return self.graphs.decode_patch(*args, steps)
        return self.lm.decode_patch(*args, steps)

    def _adapters(self, seqs: list[Sequence]) -> torch.Tensor | None:
        """Each sequence's LoRA adapter slot, or None when none of them has an adapter."""
        if self.lm.lora is None:  # no adapter was ever loaded: no sequence can hold one
            return None
        slots = [s.adapter_slot for s in seqs]
        return device_tensor(slots, torch.long, self.device) if any(slots) else None

    def acquire_adapter(self, name: str) -> AdapterUse:
        """Pin adapter `name` in a device slot for a new sequence (loading it there if it is not).
        EngineInputError if no such adapter is loaded; EngineOverloaded if running requests hold
        every slot."""
        if self.lm.lora is None or name not in self.lm.lora:
            raise EngineInputError(
                f"no LoRA adapter {name!r} is loaded", param="lora", code="adapter_not_found"
            )
        try:
            return self.lm.lora.acquire(name)
        except SlotsBusy as exc:
            raise EngineOverloaded(str(exc)) from exc

    def _decode_audio(self, rows: _RowConstants, patches: torch.Tensor) -> torch.Tensor:
        pool = self.vae_pool
        if rows.vae_slots is None:
            self._acquire_vae_slots(rows.seqs)
            rows.vae_slots = cast("list[int]", [s.vae_slot for s in rows.seqs])  # each acquired above
            rows.vae_slot_tensor = device_tensor(rows.vae_slots, torch.long, pool.device)
        latents = patches.transpose(1, 2).to(pool.dtype).contiguous()  # one layout: no recompiles
        if self.vae_graphs is not None:  # None back: decode eagerly (see cuda_graph.GraphSet)
            audio = self.vae_graphs(latents, rows.vae_slots)
            if audio is not None:
                return audio
        slots = cast("torch.Tensor", rows.vae_slot_tensor)
        audio, state = self.vae.decode_stream(latents, pool.gather(slots))
        pool.scatter(slots, state)
        return audio.float()

    def _noise_slots(self, seqs: list[Sequence]) -> np.ndarray:
        """Each sequence's noise bank slot, taken on its first patch and kept until it finishes."""
        for s in seqs:
            if s.noise_slot is None:
                s.noise_slot = self.noise.acquire()
        return np.fromiter((s.noise_slot for s in seqs), dtype=np.int64, count=len(seqs))

    def _acquire_vae_slots(self, seqs: list[Sequence]) -> None:
        """A decoder state slot for each new sequence (primed with a continuation's prompt tail)."""
        pool = self.vae_pool
        for s in seqs:
            if s.vae_slot is None:  # a continuation's decoder starts primed with the prompt's tail
                context = s.context_patches
                s.vae_slot = pool.acquire() if context is None else pool.acquire_primed(context)

    def release(self, seq: Sequence) -> None:
        """A finished request gives its decoder state and noise slots back."""
        if seq.noise_slot is not None:
            self.noise.release(seq.noise_slot)
            seq.noise_slot = None
        if seq.vae_slot is not None:
            self.vae_pool.release(seq.vae_slot)
            seq.vae_slot = None
        if seq.adapter is not None and self.lm.lora is not None:
            self.lm.lora.release(seq.adapter)
            seq.adapter = None
