"""Paged KV-cache bookkeeping: which blocks are free, who holds which, and the prefix cache.

One block table per sequence serves both LMs (each owns its own pool of the same shape). Full
prompt blocks are cached by a content hash chain once their KV is computed; a freed block keeps
its hash until it is handed out again, oldest-freed first, so recently used prefixes survive.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from polyvox.core.sequence import Sequence


@dataclass(slots=True)
class Block:
    block_id: int
    ref_count: int = 0
    hash: bytes | None = None


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        if num_blocks < 1:
            raise ValueError("num_blocks must be at least 1")
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_ids: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.hash_to_block: dict[bytes, int] = {}
        self.prefix_queries = 0
        self.prefix_hits = 0

    @property
    def num_free(self) -> int:
        return len(self.free_ids)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free_ids)

    def blocks_for(self, num_positions: int) -> int:
        return (num_positions + self.block_size - 1) // self.block_size

    def _cached_prefix(self, seq: Sequence) -> list[int]:
        """Computed blocks matching the sequence's leading full prompt blocks (never all its positions)."""
        if not self.enable_prefix_caching:
            return []
        limit = min(len(seq.block_hashes), (seq.num_tokens - 1) // self.block_size)
        hits = []
        for h in seq.block_hashes[:limit]:
            block_id = self.hash_to_block.get(h)
            if block_id is None:
                break
            hits.append(block_id)
        return hits

    def can_allocate(self, seq: Sequence) -> bool:
        hits = self._cached_prefix(seq)
        revived = sum(1 for b in hits if self.blocks[b].ref_count == 0)
        return seq.num_blocks - len(hits) + revived <= self.num_free

    def allocate(self, seq: Sequence) -> None:
        """Give a waiting sequence blocks for all its positions, reusing cached prefix blocks."""
        assert not seq.block_table
        hits = self._cached_prefix(seq)
        self.prefix_queries += len(seq.block_hashes)
        self.prefix_hits += len(hits)
        for block_id in hits:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self.free_ids[block_id]
            block.ref_count += 1
            seq.block_table.append(block_id)
        seq.num_computed = len(hits) * self.block_size
        seq.num_hashed_blocks = len(hits)
        for _ in range(seq.num_blocks - len(hits)):
            seq.block_table.append(self._take_free())

    def ensure_capacity(self, seq: Sequence, num_positions: int) -> bool:
        """Grow the sequence's table to hold `num_positions`; False (and no change) when blocks run out."""
        need = (num_positions + self.block_size - 1) // self.block_size - len(seq.block_table)
        if need <= 0:  # most steps: the last block has room
            return True
        if need > len(self.free_ids):
            return False
        for _ in range(need):
            seq.block_table.append(self._take_free())
        return True

    def commit(self, seq: Sequence) -> None:
        """Publish the sequence's newly computed full prompt blocks in the prefix cache."""
        if not self.enable_prefix_caching:
            return
        done = min(len(seq.block_hashes), seq.num_computed // self.block_size)
        for i in range(seq.num_hashed_blocks, done):
            h = seq.block_hashes[i]
            if h not in self.hash_to_block:
                block = self.blocks[seq.block_table[i]]
                block.hash = h
                self.hash_to_block[h] = block.block_id
        seq.num_hashed_blocks = max(seq.num_hashed_blocks, done)

    def free(self, seq: Sequence) -> None:
        """Release the sequence's blocks, tail first, so its prefix is the last to be evicted."""
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            assert block.ref_count >= 0
            if block.ref_count == 0:
                self.free_ids[block_id] = None
        seq.block_table = []

    def _take_free(self) -> int:
        block_id, _ = self.free_ids.popitem(last=False)
        block = self.blocks[block_id]
        if block.hash is not None:
            if self.hash_to_block.get(block.hash) == block_id:
                del self.hash_to_block[block.hash]
            block.hash = None
        block.ref_count = 1
        return block_id
