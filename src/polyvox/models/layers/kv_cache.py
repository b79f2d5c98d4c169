"""Paged KV pool of one MiniCPM4 stack: fixed-size blocks shared by every sequence in a batch."""

from __future__ import annotations

import torch


class PagedKVCache:
    """K and V pools shaped `[layers, blocks, block_size, kv_heads, head_dim]`.

    A sequence owns a list of block ids (its block table); token `i` of the sequence lives in
    block `table[i // block_size]` at offset `i % block_size`.
    """

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (num_layers, num_blocks, block_size, num_kv_heads, head_dim)
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    @property
    def num_layers(self) -> int:
        return self.k.shape[0]

    def layer(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k[index], self.v[index]

    @staticmethod
    def bytes_per_block(
        num_layers: int, block_size: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype
    ) -> int:
        """Memory one block takes in K and V together (for sizing the pool)."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        return 2 * num_layers * block_size * num_kv_heads * head_dim * itemsize
