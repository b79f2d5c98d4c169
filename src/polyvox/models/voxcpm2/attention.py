"""Paged causal attention over packed ("varlen") batches, through PyTorch SDPA.

New K/V rows are written into the pool at their slots; each sequence then attends over its
whole context, gathered through its block table, with a causal mask offset by what it had cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F


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
        positions: list[int] = []
        slots: list[int] = []
        starts = [0]
        for cached, new, table in zip(cached_lens, query_lens, block_tables, strict=True):
            if cached + new > len(table) * block_size:
                raise ValueError("block table too short for the sequence")
            for pos in range(cached, cached + new):
                positions.append(pos)
                slots.append(table[pos // block_size] * block_size + pos % block_size)
            starts.append(starts[-1] + new)
        width = max(len(t) for t in block_tables)
        tables = [list(t) + [0] * (width - len(t)) for t in block_tables]
        context = [c + n for c, n in zip(cached_lens, query_lens, strict=True)]

        def tensor(values):
            return torch.tensor(values, dtype=torch.long, device=device)

        return cls(
            positions=tensor(positions),
            slot_mapping=tensor(slots),
            query_start_loc=tensor(starts),
            context_lens=tensor(context),
            block_tables=tensor(tables),
            max_query_len=max(query_lens),
            max_context_len=max(context),
        )


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    meta: AttentionMetadata,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
) -> torch.Tensor:
    """Causal GQA attention of the new tokens `q [N, H, hd]` (`k`, `v [N, KVH, hd]`).

    `k_pool`, `v_pool` are one layer's pools `[blocks, block_size, KVH, hd]`; the new K/V are
    written into them first, so each token also sees itself.
    """
    num_blocks, block_size, kv_heads, head_dim = k_pool.shape
    k_pool.view(-1, kv_heads, head_dim).index_copy_(0, meta.slot_mapping, k.to(k_pool.dtype))
    v_pool.view(-1, kv_heads, head_dim).index_copy_(0, meta.slot_mapping, v.to(v_pool.dtype))

    batch, max_q, max_ctx = meta.num_seqs, meta.max_query_len, meta.max_context_len
    used_blocks = (max_ctx + block_size - 1) // block_size
    tables = meta.block_tables[:, :used_blocks]
    keys = k_pool[tables].view(batch, used_blocks * block_size, kv_heads, head_dim)[:, :max_ctx]
    values = v_pool[tables].view(batch, used_blocks * block_size, kv_heads, head_dim)[:, :max_ctx]

    query_lens = meta.query_start_loc[1:] - meta.query_start_loc[:-1]
    if max_q == 1:
        seq_ids = offsets = None
        queries = q.view(batch, 1, *q.shape[1:])
    else:
        seq_ids = torch.repeat_interleave(
            torch.arange(batch, device=q.device), query_lens, output_size=q.shape[0]
        )
        offsets = torch.arange(q.shape[0], device=q.device) - meta.query_start_loc[seq_ids]
        queries = q.new_zeros(batch, max_q, *q.shape[1:])
        queries[seq_ids, offsets] = q

    # Key j is visible to query i of a sequence iff j <= cached + i and j < context length.
    # Padded query rows still see key 0, so no row is fully masked (no NaN); they are dropped.
    cached = (meta.context_lens - query_lens).view(batch, 1, 1)
    key_idx = torch.arange(max_ctx, device=q.device).view(1, 1, max_ctx)
    query_idx = torch.arange(max_q, device=q.device).view(1, max_q, 1)
    mask = (key_idx <= cached + query_idx) & (key_idx < meta.context_lens.view(batch, 1, 1))

    out = F.scaled_dot_product_attention(
        queries.transpose(1, 2),
        keys.transpose(1, 2).to(q.dtype),
        values.transpose(1, 2).to(q.dtype),
        attn_mask=mask.unsqueeze(1),
        enable_gqa=True,
    ).transpose(1, 2)
    if seq_ids is None:
        return out.reshape(q.shape)
    return out[seq_ids, offsets]
