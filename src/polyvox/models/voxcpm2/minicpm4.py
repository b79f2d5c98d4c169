"""The MiniCPM4 decoder stack (RMSNorm, LongRoPE, GQA attention, SiLU-gated MLP, muP scaling).

`MiniCPM4Model` is the causal, paged form used by the base and residual LMs; the layers are
shared with the non-causal local transformers of LocEnc/LocDiT (`local_transformer.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from .attention import AttentionMetadata, paged_attention
from .config import LMConfig
from .kv_cache import PagedKVCache

# (q [..., H, hd], k [..., KVH, hd], v) -> attention output [..., H, hd]
AttendFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(dim=-1, keepdim=True)
        return (x * torch.rsqrt(variance + self.eps)).to(x.dtype) * self.weight


class LongRoPE(nn.Module):
    """LongRoPE cos/sin tables, indexed by explicit positions.

    The tables are built in fp32 and follow the module's dtype like the reference (rounded to
    bf16 when the model is), so the rotation matches it in every dtype.
    """

    def __init__(self, config: LMConfig, max_positions: int | None = None) -> None:
        super().__init__()
        scaling = config.rope_scaling
        dim = config.head_dim
        original = scaling.original_max_position_embeddings
        long = config.max_position_embeddings > original
        factors = torch.tensor(scaling.long_factor if long else scaling.short_factor, dtype=torch.float32)
        scale = config.max_position_embeddings / original
        attention_factor = math.sqrt(1 + math.log(scale) / math.log(original))
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_positions or config.max_position_embeddings, dtype=torch.float32)
        freqs = torch.outer(t, 1.0 / factors) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos() * attention_factor, persistent=False)
        self.register_buffer("sin_cached", emb.sin() * attention_factor, persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos_cached[positions], self.sin_cached[positions]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """Rotate `q [..., L, H, hd]` and `k` by the per-token `cos`, `sin [L, hd]` (in fp32)."""
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    qf, kf = q.float(), k.float()
    q_out = qf * cos + _rotate_half(qf) * sin
    k_out = kf * cos + _rotate_half(kf) * sin
    return q_out.to(q.dtype), k_out.to(k.dtype)


class MiniCPMAttention(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        hidden = config.hidden_size
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=False)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, attend: AttendFn):
        q = self.q_proj(x).unflatten(-1, (self.num_heads, self.head_dim))
        k = self.k_proj(x).unflatten(-1, (self.num_kv_heads, self.head_dim))
        v = self.v_proj(x).unflatten(-1, (self.num_kv_heads, self.head_dim))
        if rope is not None:
            q, k = apply_rope(q, k, *rope)
        return self.o_proj(attend(q, k, v).flatten(-2))


class MiniCPMMLP(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class MiniCPMDecoderLayer(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.self_attn = MiniCPMAttention(config)
        self.mlp = MiniCPMMLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.residual_scale = (
            config.scale_depth / math.sqrt(config.num_hidden_layers) if config.use_mup else None
        )

    def _add(self, residual: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        if self.residual_scale is None:
            return residual + update
        return residual + update * self.residual_scale

    def forward(self, x: torch.Tensor, rope, attend: AttendFn) -> torch.Tensor:
        x = self._add(x, self.self_attn(self.input_layernorm(x), rope, attend))
        return self._add(x, self.mlp(self.post_attention_layernorm(x)))


class MiniCPM4Model(nn.Module):
    """Causal MiniCPM4 over packed new tokens `[N, hidden]`, with its K/V in a paged pool."""

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = (
            nn.Embedding(config.vocab_size, config.hidden_size) if config.vocab_size > 0 else nn.Identity()
        )
        self.layers = nn.ModuleList(MiniCPMDecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rope_emb = None if config.no_rope else LongRoPE(config)

    def forward(self, embeds: torch.Tensor, meta: AttentionMetadata, kv: PagedKVCache) -> torch.Tensor:
        rope = self.rope_emb(meta.positions) if self.rope_emb is not None else None
        x = embeds
        for index, layer in enumerate(self.layers):
            k_pool, v_pool = kv.layer(index)

            def attend(q, k, v, k_pool=k_pool, v_pool=v_pool):
                return paged_attention(q, k, v, meta, k_pool, v_pool)

            x = layer(x, rope, attend)
        return self.norm(x)

    def make_kv_cache(
        self, num_blocks: int, block_size: int, dtype: torch.dtype, device: torch.device | str
    ) -> PagedKVCache:
        c = self.config
        return PagedKVCache(
            c.num_hidden_layers, num_blocks, block_size, c.num_key_value_heads, c.head_dim, dtype, device
        )
