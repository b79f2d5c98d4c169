"""Paged causal attention over packed ("varlen") batches, through PyTorch SDPA or flash-attn.

New K/V rows are written into the pool at their slots; each sequence then attends over its
whole context, gathered through its block table, with a causal mask offset by what it had cached.
flash-attn, when installed, takes CUDA fp16/bf16 batches (`use_backend`); it is never required.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch
import torch.nn.functional as F

from polyvox.models.host_to_device import to_device

BACKENDS = ("auto", "sdpa", "flash")
_flash: ModuleType | None = None  # the flash_attn module while it is the chosen backend


def use_backend(name: str) -> str:
    """Choose the attention backend for CUDA fp16/bf16 batches; returns the one in effect.

    "auto" takes flash-attn when it imports and SDPA otherwise; "flash" insists (ImportError if it
    is missing); "sdpa" never uses it. CPU and fp32 batches always run through SDPA."""
    global _flash
    if name not in BACKENDS:
        raise ValueError(f"attention backend must be one of {', '.join(BACKENDS)}")
    _flash = None
    if name == "sdpa":
        return "sdpa"
    try:
        module = importlib.import_module("flash_attn")
    except ImportError:
        if name == "flash":
            raise
        return "sdpa"
    _flash = module
    return "flash"


def _flash_applies(q: torch.Tensor) -> bool:
    return _flash is not None and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16)


@dataclass
class AttentionMetadata:
    positions: torch.Tensor  # Long[N] position of each new token in its sequence (RoPE)
    slot_mapping: torch.Tensor  # Long[N] flat KV slot (block_id * block_size + offset) to write
    query_start_loc: torch.Tensor  # Long[B+1] cumulative new-token counts
    context_lens: torch.Tensor  # Long[B] KV length of each sequence after this call (cached + new)
    block_tables: torch.Tensor  # Long[B, max_blocks] KV block ids, padded with 0
    max_query_len: int
    max_context_len: int

    @property
    def num_seqs(self) -> int:
        return self.context_lens.shape[0]

    @classmethod
    def build(
        cls,
        cached_lens: Sequence[int],
        query_lens: Sequence[int],
        block_tables: Sequence[Sequence[int]],
        block_size: int,
        device: torch.device | str = "cpu",
    ) -> AttentionMetadata:
        """Metadata for B sequences that had `cached_lens` tokens and now add `query_lens`."""
        table_lens = np.fromiter(map(len, block_tables), dtype=np.int64, count=len(block_tables))
        width = int(table_lens.max()) if len(table_lens) else 0
        tables = np.zeros((len(table_lens), width), dtype=np.int64)
        flat = itertools.chain.from_iterable(block_tables)
        tables[np.arange(width) < table_lens[:, None]] = np.fromiter(flat, np.int64, int(table_lens.sum()))
        cached = np.asarray(cached_lens, dtype=np.int64)
        new = np.asarray(query_lens, dtype=np.int64)
        return cls.from_arrays(cached, new, tables, table_lens, block_size, device)

    @classmethod
    def from_arrays(
        cls,
        cached: np.ndarray,
        new: np.ndarray,
        tables: np.ndarray,
        table_lens: np.ndarray,
        block_size: int,
        device: torch.device | str = "cpu",
    ) -> AttentionMetadata:
        """`build` from Long arrays: `cached`, `new` `[B]`, the block tables padded `[B, width]` and
        their lengths `[B]`.

        Built with numpy, never per token or per block in Python (it runs on the host every step, for
        every running sequence), and sent to the device as one buffer."""
        batch = len(table_lens)
        if not len(cached) == len(new) == batch:
            raise ValueError("cached_lens, query_lens and block_tables differ in length")
        context = cached + new
        if (context > table_lens * block_size).any():
            raise ValueError("block table too short for the sequence")
        width = tables.shape[1]
        starts = np.zeros(batch + 1, dtype=np.int64)
        np.cumsum(new, out=starts[1:])
        rows = np.repeat(np.arange(batch), new)  # the sequence of each new token
        positions = np.arange(int(starts[-1])) - np.repeat(starts[:-1] - cached, new)
        slots = tables[rows, positions // block_size] * block_size + positions % block_size
        packed = to_device(
            torch.from_numpy(np.concatenate((positions, slots, starts, context, tables.ravel()))), device
        )
        n = len(positions)
        positions_t, slots_t, starts_t, context_t, tables_t = packed.split(
            [n, n, batch + 1, batch, batch * width]
        )
        return cls(
            positions=positions_t,
            slot_mapping=slots_t,
            query_start_loc=starts_t,
            context_lens=context_t,
            block_tables=tables_t.view(batch, width),
            max_query_len=int(new.max()),
            max_context_len=int(context.max()),
        )


@dataclass(slots=True)
class AttentionPlan:
    """What every layer's attention over one batch shares, built once per forward instead of per layer:
    the SDPA mask and the packing of new tokens into `[B, max_q]` rows (None for decode), or
    flash-attn's key layout."""

    mask: torch.Tensor | None = None  # Bool[B, 1, group * max_q, max_ctx] (see `paged_attention`)
    seq_ids: torch.Tensor | None = None  # Long[N] row of each new token (prefill only)
    offsets: torch.Tensor | None = None  # Long[N] its place in that row
    flash: bool = False
    valid_keys: torch.Tensor | None = None  # Bool[B, max_ctx] (flash prefill)
    cu_seqlens_k: torch.Tensor | None = None  # Int[B+1] (flash prefill)


def plan_attention(meta: AttentionMetadata, like: torch.Tensor, group: int = 1) -> AttentionPlan:
    """The shared part of attention for a batch whose queries have `like`'s dtype and device and
    `group` query heads per key/value head."""
    device = meta.context_lens.device
    batch, max_q, max_ctx = meta.num_seqs, meta.max_query_len, meta.max_context_len
    lens = meta.context_lens
    if _flash_applies(like):
        return AttentionPlan(flash=True) if max_q == 1 else _flash_prefill_plan(meta)
    query_lens = meta.query_start_loc[1:] - meta.query_start_loc[:-1]
    plan = AttentionPlan()
    if max_q > 1:
        total = int(meta.positions.shape[0])
        plan.seq_ids = torch.repeat_interleave(
            torch.arange(batch, device=device), query_lens, output_size=total
        )
        plan.offsets = torch.arange(total, device=device) - meta.query_start_loc[plan.seq_ids]
    # Key j is visible to query i of a sequence iff j <= cached + i and j < context length.
    # Padded query rows still see key 0, so no row is fully masked (no NaN); they are dropped.
    cached = (lens - query_lens).view(batch, 1, 1)
    key_idx = torch.arange(max_ctx, device=device).view(1, 1, max_ctx)
    query_idx = torch.arange(max_q, device=device).view(1, max_q, 1)
    mask = (key_idx <= cached + query_idx) & (key_idx < lens.view(batch, 1, 1))
    # one row per (query head of a group, query), as `paged_attention` folds them
    plan.mask = mask.view(batch, 1, 1, max_q, max_ctx).expand(batch, 1, group, max_q, max_ctx)
    plan.mask = plan.mask.reshape(batch, 1, group * max_q, max_ctx)  # a view for decode batches
    return plan


def _flash_prefill_plan(meta: AttentionMetadata) -> AttentionPlan:
    lens = meta.context_lens
    valid = torch.arange(meta.max_context_len, device=lens.device).view(1, -1) < lens.view(-1, 1)
    cu_seqlens_k = F.pad(lens.cumsum(0), (1, 0)).to(torch.int32)
    return AttentionPlan(flash=True, valid_keys=valid, cu_seqlens_k=cu_seqlens_k)


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    meta: AttentionMetadata,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
    plan: AttentionPlan | None = None,
) -> torch.Tensor:
    """Causal GQA attention of the new tokens `q [N, H, hd]` (`k`, `v [N, KVH, hd]`).

    `k_pool`, `v_pool` are one layer's pools `[blocks, block_size, KVH, hd]`; the new K/V are
    written into them first, so each token also sees itself. `plan` is `plan_attention(meta, q,
    H // KVH)`, made here when not given.
    """
    _, _, kv_heads, head_dim = k_pool.shape
    group = q.shape[1] // kv_heads
    plan = plan or plan_attention(meta, q, group)
    k_pool.view(-1, kv_heads, head_dim).index_copy_(0, meta.slot_mapping, k.to(k_pool.dtype))
    v_pool.view(-1, kv_heads, head_dim).index_copy_(0, meta.slot_mapping, v.to(v_pool.dtype))
    keys, values = gather_context(meta, k_pool, v_pool)

    if plan.flash:
        return _flash_attention(_flash, q, keys.to(q.dtype), values.to(q.dtype), meta, plan)

    batch, max_q = meta.num_seqs, meta.max_query_len
    if plan.seq_ids is None:
        queries = q.view(batch, 1, *q.shape[1:])
    else:
        queries = q.new_zeros(batch, max_q, *q.shape[1:])
        queries[plan.seq_ids, plan.offsets] = q
    # The query heads that share a key/value head are folded into the query length, so SDPA sees as
    # many query heads as key heads. With `enable_gqa` and a mask it would take its math path, which
    # copies every key and value once per query head; folded, its fused kernels take the batch.
    folded = queries.view(batch, max_q, kv_heads, group, head_dim).permute(0, 2, 3, 1, 4)
    out = F.scaled_dot_product_attention(
        folded.reshape(batch, kv_heads, group * max_q, head_dim),
        keys.transpose(1, 2).to(q.dtype),
        values.transpose(1, 2).to(q.dtype),
        attn_mask=plan.mask,
    )
    out = out.view(batch, kv_heads, group, max_q, head_dim).permute(0, 3, 1, 2, 4)
    out = out.reshape(batch, max_q, kv_heads * group, head_dim)
    if plan.seq_ids is None:
        return out.reshape(q.shape)
    return out[plan.seq_ids, plan.offsets]


def gather_context(meta: AttentionMetadata, k_pool: torch.Tensor, v_pool: torch.Tensor):
    """Each sequence's keys and values through its block table: `[B, max_ctx, KVH, hd]` (padded)."""
    _, block_size, kv_heads, head_dim = k_pool.shape
    batch, max_ctx = meta.num_seqs, meta.max_context_len
    used_blocks = (max_ctx + block_size - 1) // block_size
    tables = meta.block_tables[:, :used_blocks]
    keys = k_pool[tables].view(batch, used_blocks * block_size, kv_heads, head_dim)[:, :max_ctx]
    values = v_pool[tables].view(batch, used_blocks * block_size, kv_heads, head_dim)[:, :max_ctx]
    return keys, values


def compare_backends(
    device: torch.device, dtype: torch.dtype, num_heads: int, num_kv_heads: int, head_dim: int
) -> float:
    """Largest difference between the chosen backend and SDPA on random prefill and decode batches
    (a start-up guard: a flash-attn build that disagrees is not used)."""
    global _flash
    chosen = _flash
    generator = torch.Generator(device="cpu").manual_seed(0)
    worst = 0.0
    block_size = 16
    for cached, new in (([0, 5, 40], [7, 3, 1]), ([9, 33, 0, 70], [1, 1, 1, 1])):
        tables = [list(range(i * 8, i * 8 + 8)) for i in range(len(cached))]
        meta = AttentionMetadata.build(cached, new, tables, block_size, device)

        def rand(*shape):
            return torch.randn(*shape, generator=generator).to(device, dtype)

        pool_shape = (len(cached) * 8, block_size, num_kv_heads, head_dim)
        k_pool, v_pool = rand(*pool_shape), rand(*pool_shape)
        q = rand(sum(new), num_heads, head_dim)
        k, v = rand(sum(new), num_kv_heads, head_dim), rand(sum(new), num_kv_heads, head_dim)
        try:
            _flash = None
            reference = paged_attention(q, k, v, meta, k_pool, v_pool).float()
            _flash = chosen
            got = paged_attention(q, k, v, meta, k_pool, v_pool).float()
        finally:
            _flash = chosen
        worst = max(worst, float((got - reference).abs().max()))
    return worst


def _flash_attention(flash, q, keys, values, meta: AttentionMetadata, plan: AttentionPlan | None = None):
    """flash-attn over the gathered context `keys`, `values [B, max_ctx, KVH, hd]` (any block size:
    its own paged kernels want blocks of 256). Its causal mask is aligned bottom-right, so query i of
    a sequence sees its cached keys plus new keys up to i — the same rule as the SDPA mask."""
    if meta.max_query_len == 1:  # decode: one query per sequence, fixed shapes (CUDA-graph safe)
        out = flash.flash_attn_with_kvcache(
            q.unsqueeze(1), keys, values, cache_seqlens=meta.context_lens.to(torch.int32), causal=True
        )
        return out.squeeze(1)
    if plan is None or plan.valid_keys is None:
        plan = _flash_prefill_plan(meta)
    return flash.flash_attn_varlen_func(
        q,
        keys[plan.valid_keys],
        values[plan.valid_keys],
        cu_seqlens_q=meta.query_start_loc.to(torch.int32),
        cu_seqlens_k=plan.cu_seqlens_k,
        max_seqlen_q=meta.max_query_len,
        max_seqlen_k=meta.max_context_len,
        causal=True,
    )
