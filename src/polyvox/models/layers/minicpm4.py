"""The MiniCPM4 decoder stack (RMSNorm, LongRoPE, GQA attention, SiLU-gated MLP, muP scaling).

`MiniCPM4Model` is the causal, paged form used by the base and residual LMs; the layers are
shared with the non-causal local transformers of LocEnc/LocDiT (`local_transformer.py`).

A step is bound by how many operators it launches, so the layers launch few: q/k/v come from one
projection and gate/up from another (`fused_linear.py`; state dicts keep the official names), the
norm is `F.rms_norm` (one fused kernel on CUDA), RoPE rotates q and k together, and the attention
mask is built once per forward for all layers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from polyvox.models.speech_config import LMConfig

from .attention import AttentionMetadata, paged_attention, plan_attention
from .fused_linear import FusedLinear, keep_official_names
from .kv_cache import PagedKVCache

# (q [..., H, hd], k [..., KVH, hd], v) -> attention output [..., H, hd]
AttendFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x * rsqrt(mean(x²) + eps) * weight, in fp32 inside (in bf16 the official code rounds once
        # more, before the weight: results differ by at most a bf16 unit in the last place)
        return F.rms_norm(x, self.weight.shape, self.weight, self.eps)


class LongRoPE(nn.Module):
    """LongRoPE cos/sin tables, indexed by explicit positions.

    The tables are built in fp32 and follow the module's dtype like the reference (rounded to
    bf16 when the model is), so the rotation matches it in every dtype. The sin table's first half
    is stored negated (see `apply_rope`).
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
        sign = torch.cat((-torch.ones(dim // 2), torch.ones(dim // 2)))
        self.register_buffer("cos_cached", emb.cos() * attention_factor, persistent=False)
        self.register_buffer("sin_cached", emb.sin() * attention_factor * sign, persistent=False)

    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos_cached[positions], self.sin_cached[positions]

    def window(self, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The tables for positions 0..length-1 (views: no operator runs)."""
        return self.cos_cached[:length], self.sin_cached[:length]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x [..., L, heads, hd]` by the per-token `cos`, `signed_sin [L, hd]`, in fp32.

    The usual `x * cos + rotate_half(x) * sin`, where rotate_half([x1, x2]) = [-x2, x1]: rolling x by
    half a head gives [x2, x1] and the sign lives in the table, so q and k rotated together (as one
    `x`) take four operators besides the casts, where the usual form takes five for each.
    """
    xf = x.float()
    rolled = xf.roll(x.shape[-1] // 2, dims=-1)
    return (xf * cos.unsqueeze(-2) + rolled * signed_sin.unsqueeze(-2)).to(x.dtype)


class MiniCPMAttention(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        hidden = config.hidden_size
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        self.qkv_proj = FusedLinear(hidden, {"q_proj": q, "k_proj": kv, "v_proj": kv})
        keep_official_names(self, "qkv_proj")
        self.o_proj = nn.Linear(q, hidden, bias=False)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None, attend: AttendFn):
        qkv = self.qkv_proj(x).unflatten(-1, (self.num_heads + 2 * self.num_kv_heads, self.head_dim))
        qk, v = qkv.split((self.num_heads + self.num_kv_heads, self.num_kv_heads), dim=-2)
        if rope is not None:
            qk = apply_rope(qk, *rope)
        q, k = qk.split((self.num_heads, self.num_kv_heads), dim=-2)
        return self.o_proj(attend(q, k, v).flatten(-2))


class MiniCPMMLP(nn.Module):
    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        inter = config.intermediate_size
        self.gate_up_proj = FusedLinear(config.hidden_size, {"gate_proj": inter, "up_proj": inter})
        keep_official_names(self, "gate_up_proj")
        self.down_proj = nn.Linear(inter, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


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
        plan = plan_attention(
            meta, embeds, self.config.num_attention_heads // self.config.num_key_value_heads
        )
        x = embeds
        for index, layer in enumerate(self.layers):
            k_pool, v_pool = kv.layer(index)

            def attend(q, k, v, k_pool=k_pool, v_pool=v_pool):
                return paged_attention(q, k, v, meta, k_pool, v_pool, plan)

            x = layer(x, rope, attend)
        return self.norm(x)

    def make_kv_cache(
        self, num_blocks: int, block_size: int, dtype: torch.dtype, device: torch.device | str
    ) -> PagedKVCache:
        c = self.config
        return PagedKVCache(
            c.num_hidden_layers, num_blocks, block_size, c.num_key_value_heads, c.head_dim, dtype, device
        )
