"""Attention backends: SDPA on every device, and polyvox's adapter to flash-attn checked against an
independent reading of flash-attn's documented semantics (flash-attn itself needs CUDA; on a GPU the
engine also compares it with SDPA at start and refuses it on disagreement)."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from polyvox.core.config import BatchingConfig
from polyvox.models.layers.attention import (
    AttentionMetadata,
    _flash_attention,
    gather_context,
    paged_attention,
    use_backend,
)

HEADS, KV_HEADS, HEAD_DIM, BLOCK = 4, 2, 8, 4


def reference_attention(q, k, v, causal: bool) -> torch.Tensor:
    """Softmax attention of `q [Lq, H, hd]` over `k`, `v [Lk, KVH, hd]`; flash-attn's causal mask is
    aligned to the bottom right: query i sees key j iff j <= i + Lk - Lq."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        lq, lk = q.shape[0], k.shape[0]
        visible = torch.arange(lk).view(1, -1) <= torch.arange(lq).view(-1, 1) + (lk - lq)
        scores = scores.masked_fill(~visible, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)


class DocumentedFlash:
    """flash-attn's two entry points as its docs describe them, in plain PyTorch."""

    @staticmethod
    def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens, causal):
        assert cache_seqlens.dtype == torch.int32
        rows = [
            reference_attention(q[b], k_cache[b, :n], v_cache[b, :n], causal)
            for b, n in enumerate(cache_seqlens.tolist())
        ]
        return torch.stack(rows)

    @staticmethod
    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal):
        assert cu_seqlens_q.dtype == cu_seqlens_k.dtype == torch.int32
        cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        assert max_seqlen_q == max(b - a for a, b in zip(cq, cq[1:], strict=False))
        assert max_seqlen_k == max(b - a for a, b in zip(ck, ck[1:], strict=False))
        parts = [
            reference_attention(q[cq[b] : cq[b + 1]], k[ck[b] : ck[b + 1]], v[ck[b] : ck[b + 1]], causal)
            for b in range(len(cq) - 1)
        ]
        return torch.cat(parts)


@pytest.mark.parametrize(
    "cached, new",
    [([0, 5, 13], [7, 3, 1]), ([9, 2, 0, 20], [1, 1, 1, 1])],
    ids=["prefill-with-cache", "decode"],
)
def test_the_flash_adapter_gives_the_sdpa_result(cached, new):
    torch.manual_seed(0)
    tables = [list(range(i * 8, i * 8 + 8)) for i in range(len(cached))]
    meta = AttentionMetadata.build(cached, new, tables, BLOCK)
    k_pool = torch.randn(len(cached) * 8, BLOCK, KV_HEADS, HEAD_DIM)
    v_pool = torch.randn_like(k_pool)
    q = torch.randn(sum(new), HEADS, HEAD_DIM)
    k, v = torch.randn(sum(new), KV_HEADS, HEAD_DIM), torch.randn(sum(new), KV_HEADS, HEAD_DIM)
    sdpa = paged_attention(q, k, v, meta, k_pool, v_pool)  # also writes the new K/V into the pools
    keys, values = gather_context(meta, k_pool, v_pool)
    flash = _flash_attention(DocumentedFlash, q, keys, values, meta)
    assert flash.shape == sdpa.shape
    assert torch.allclose(flash, sdpa, atol=1e-5), (flash - sdpa).abs().max()


def test_auto_falls_back_to_sdpa_without_flash_attn_and_flash_insists(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", None)  # importing it raises ImportError
    try:
        assert use_backend("auto") == "sdpa"
        with pytest.raises(ImportError):
            use_backend("flash")
    finally:
        use_backend("sdpa")


def test_an_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="attention_backend"):
        BatchingConfig(attention_backend="xformers")
    with pytest.raises(ValueError, match="attention backend"):
        use_backend("xformers")
