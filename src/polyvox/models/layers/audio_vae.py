"""AudioVAE V2 (VoxCPM2's; VoxCPM 1.x's V1 is built of it): a causal encoder (16 kHz wav -> latents at
25 Hz) and a sample-rate-conditioned causal decoder (latents -> 48 kHz wav), with a batched streaming
decode whose state is explicit.

Parameter names follow the official checkpoint (`encoder.block.*`, `decoder.model.*`,
`decoder.sr_cond_model.*`); weight-norm pairs (`weight_g`/`weight_v`) are folded into plain weights on load.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from polyvox.models.layers.audio_vae_config import AudioVAEConfig

State = list[torch.Tensor]


@dataclass
class StreamState:
    """Left context of every causal convolution of the decoder; each buffer is [batch, channels, context]."""

    buffers: State

    @property
    def batch_size(self) -> int:
        return self.buffers[0].shape[0]

    def select(self, index: int | slice | torch.Tensor) -> StreamState:
        if isinstance(index, int):
            index = slice(index, index + 1)
        return StreamState([b[index] for b in self.buffers])

    @staticmethod
    def cat(states: Sequence[StreamState]) -> StreamState:
        return StreamState(
            [torch.cat(group, dim=0) for group in zip(*(s.buffers for s in states), strict=True)]
        )


class CausalConv1d(nn.Conv1d):
    """Conv1d padded on the left only; when streaming, the left context comes from and goes to `state`."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, left_pad: int = 0, **kwargs):
        super().__init__(in_channels, out_channels, kernel_size, **kwargs)
        self.left_pad = left_pad
        self.slot = -1

    def forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:
        if self.left_pad:
            if state is None:
                x = F.pad(x, (self.left_pad, 0))
            else:
                x = torch.cat([state[self.slot], x], dim=-1)
                state[self.slot] = x[..., x.shape[-1] - self.left_pad :]
        return super().forward(x)


class CausalConvTranspose1d(nn.ConvTranspose1d):
    """Upsampling by `stride` with kernel 2*stride, cut so each output sample depends only on past inputs."""

    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__(in_channels, out_channels, kernel_size=2 * stride, stride=stride)
        self.slot = -1

    def forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:  # type: ignore[override]
        s = self.stride[0]
        if state is None:
            return super().forward(x)[..., : x.shape[-1] * s]
        x = torch.cat([state[self.slot], x], dim=-1)
        state[self.slot] = x[..., -1:]
        return super().forward(x)[..., s : x.shape[-1] * s]


class Snake1d(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:
        return x + (self.alpha + 1e-9).reciprocal() * torch.sin(self.alpha * x).pow(2)


class Tanh(nn.Module):
    def forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:
        return torch.tanh(x)


def _run(layers: Iterable[nn.Module], x: torch.Tensor, state: State | None) -> torch.Tensor:
    for layer in layers:
        x = layer(x, state)
    return x


class CausalResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int = 1, groups: int = 1):
        super().__init__()
        self.block = nn.Sequential(
            Snake1d(dim),
            CausalConv1d(dim, dim, 7, dilation=dilation, groups=groups, left_pad=6 * dilation),
            Snake1d(dim),
            CausalConv1d(dim, dim, 1),
        )

    def forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:
        return x + _run(self.block, x, state)


def _residual_units(dim: int, groups: int) -> list[nn.Module]:
    return [CausalResidualUnit(dim, dilation, groups) for dilation in (1, 3, 9)]


class CausalEncoderBlock(nn.Module):
    def __init__(self, input_dim: int, output_dim: int, stride: int, groups: int):
        super().__init__()
        self.block = nn.Sequential(
            *_residual_units(input_dim, groups),
            Snake1d(input_dim),
            CausalConv1d(input_dim, output_dim, 2 * stride, stride=stride, left_pad=stride),
        )

    def forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:
        return _run(self.block, x, state)


class CausalEncoder(nn.Module):
    def __init__(self, d_model: int, latent_dim: int, strides: list[int], depthwise: bool):
        super().__init__()
        layers: list[nn.Module] = [CausalConv1d(1, d_model, 7, left_pad=6)]
        for stride in strides:
            groups = d_model if depthwise else 1
            layers.append(CausalEncoderBlock(d_model, 2 * d_model, stride, groups))
            d_model *= 2
        self.block = nn.Sequential(*layers)
        self.fc_mu = CausalConv1d(d_model, latent_dim, 3, left_pad=2)
        self.fc_logvar = CausalConv1d(d_model, latent_dim, 3, left_pad=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_mu(_run(self.block, x, None))


class NoiseBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.linear = CausalConv1d(dim, dim, 1, bias=False)

    def forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:
        noise = torch.randn((x.shape[0], 1, x.shape[-1]), device=x.device, dtype=x.dtype)
        return x + noise * self.linear(x)


class CausalDecoderBlock(nn.Module):
    def __init__(self, input_dim: int, output_dim: int, stride: int, groups: int, use_noise_block: bool):
        super().__init__()
        layers: list[nn.Module] = [Snake1d(input_dim), CausalConvTranspose1d(input_dim, output_dim, stride)]
        if use_noise_block:
            layers.append(NoiseBlock(output_dim))
        layers += _residual_units(output_dim, groups)
        self.block = nn.Sequential(*layers)
        self.input_channels = input_dim

    def forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:
        return _run(self.block, x, state)


class SampleRateConditionLayer(nn.Module):
    """Conditions a decoder stage on the output-rate bucket (a per-channel scale and bias by default)."""

    def __init__(self, input_dim: int, buckets: int, cond_type: str, cond_dim: int, out_layer: bool):
        super().__init__()
        self.cond_type = cond_type
        if cond_type in ("scale_bias", "scale_bias_init"):
            self.scale_embed = nn.Embedding(buckets, input_dim)
            self.bias_embed = nn.Embedding(buckets, input_dim)
            if cond_type == "scale_bias":  # start as the identity
                nn.init.ones_(self.scale_embed.weight)
                nn.init.zeros_(self.bias_embed.weight)
            else:
                nn.init.normal_(self.scale_embed.weight, mean=1.0)
        elif cond_type == "add":
            self.cond_embed = nn.Embedding(buckets, input_dim)
        else:
            self.cond_embed = nn.Embedding(buckets, cond_dim)
        out_in = input_dim + cond_dim if cond_type == "concat" else input_dim
        self.out_layer = (
            nn.Sequential(Snake1d(out_in), CausalConv1d(out_in, input_dim, 1))
            if out_layer
            else nn.Sequential()
        )

    def forward(self, x: torch.Tensor, sr_idx: torch.Tensor) -> torch.Tensor:
        if self.cond_type == "add":
            x = x + self.cond_embed(sr_idx).unsqueeze(-1)
        elif self.cond_type == "concat":
            cond = self.cond_embed(sr_idx).unsqueeze(-1).expand(x.shape[0], -1, x.shape[-1])
            x = torch.cat([x, cond], dim=1)
        else:
            x = x * self.scale_embed(sr_idx).unsqueeze(-1) + self.bias_embed(sr_idx).unsqueeze(-1)
        return _run(self.out_layer, x, None)


class CausalDecoder(nn.Module):
    sr_bin_boundaries: torch.Tensor
    out_rate_bin: torch.Tensor

    def __init__(self, config: AudioVAEConfig):
        super().__init__()
        latent, channels = config.latent_dim, config.decoder_dim
        assert latent is not None  # __post_init__ fills it in
        if config.depthwise:
            layers: list[nn.Module] = [
                CausalConv1d(latent, latent, 7, groups=latent, left_pad=6),
                CausalConv1d(latent, channels, 1),
            ]
        else:
            layers = [CausalConv1d(latent, channels, 7, left_pad=6)]
        for i, stride in enumerate(config.decoder_rates):
            input_dim, output_dim = channels // 2**i, channels // 2 ** (i + 1)
            groups = output_dim if config.depthwise else 1
            layers.append(CausalDecoderBlock(input_dim, output_dim, stride, groups, config.use_noise_block))
        layers += [Snake1d(output_dim), CausalConv1d(output_dim, 1, 7, left_pad=6), Tanh()]
        self.model = nn.ModuleList(layers)
        if config.sr_bin_boundaries is None:
            self.sr_cond_model = None
            return
        self.register_buffer("sr_bin_boundaries", torch.tensor(config.sr_bin_boundaries, dtype=torch.int32))
        # the output rate's bin, kept on the module's device (no host-to-device copy per decode, which
        # a CUDA graph could not capture)
        out_rate = torch.tensor([config.out_sample_rate], dtype=torch.int32)
        self.register_buffer(
            "out_rate_bin", torch.bucketize(out_rate, self.sr_bin_boundaries), persistent=False
        )
        buckets = len(config.sr_bin_boundaries) + 1
        self.sr_cond_model = nn.ModuleList(  # None where a layer takes no condition
            SampleRateConditionLayer(  # type: ignore[misc]
                layer.input_channels, buckets, config.cond_type, config.cond_dim, config.cond_out_layer
            )
            if isinstance(layer, CausalDecoderBlock)
            else None
            for layer in layers
        )

    def forward(self, x: torch.Tensor, sr_idx: torch.Tensor | None, state: State | None) -> torch.Tensor:
        for i, layer in enumerate(self.model):
            if self.sr_cond_model is not None and self.sr_cond_model[i] is not None:
                x = self.sr_cond_model[i](x, sr_idx)
            x = layer(x, state)
        return x


class AudioVAE(nn.Module):
    """`encode(wav16k[B,S]) -> latents[B,D,T]`, `decode(latents) -> wav[B,1,T*decode_chunk_size]`."""

    def __init__(self, config: AudioVAEConfig | None = None):
        super().__init__()
        self.config = config = config or AudioVAEConfig()
        assert config.latent_dim is not None  # __post_init__ fills it in
        self.latent_dim: int = config.latent_dim
        self.sample_rate = config.sample_rate
        self.out_sample_rate = config.out_sample_rate
        self.chunk_size = self.hop_length = math.prod(config.encoder_rates)
        self.decode_chunk_size = math.prod(config.decoder_rates)
        self.encoder = CausalEncoder(
            config.encoder_dim, self.latent_dim, config.encoder_rates, config.depthwise
        )
        self.decoder = CausalDecoder(config)
        self._stream_shapes: list[tuple[int, int]] = []
        for module in self.decoder.modules():
            if isinstance(module, CausalConvTranspose1d) or (
                isinstance(module, CausalConv1d) and module.left_pad
            ):
                module.slot = len(self._stream_shapes)
                context = module.left_pad if isinstance(module, CausalConv1d) else 1
                self._stream_shapes.append((module.in_channels, context))

    def _sr_idx(self, device: torch.device) -> torch.Tensor | None:
        if self.decoder.sr_cond_model is None:
            return None
        return self.decoder.out_rate_bin.to(device)

    @torch.inference_mode()
    def encode(self, wav: torch.Tensor) -> torch.Tensor:
        """wav [B, S] (or [B, 1, S]) at `sample_rate`, right-padded to whole latent frames -> mu [B, D, T]."""
        if wav.dim() == 2:
            wav = wav.unsqueeze(1)
        pad = -wav.shape[-1] % self.hop_length
        return self.encoder(F.pad(wav, (0, pad)))

    @torch.inference_mode()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """latents [B, D, T] -> wav [B, 1, T * decode_chunk_size] at `out_sample_rate`."""
        return self.decoder(latents, self._sr_idx(latents.device), None)

    def init_stream_state(
        self, batch: int, device: torch.device | None = None, dtype: torch.dtype | None = None
    ) -> StreamState:
        ref = next(self.decoder.parameters())
        device, dtype = device or ref.device, dtype or ref.dtype
        return StreamState(
            [torch.zeros(batch, c, n, device=device, dtype=dtype) for c, n in self._stream_shapes]
        )

    @torch.inference_mode()
    def decode_stream(self, latents: torch.Tensor, state: StreamState) -> tuple[torch.Tensor, StreamState]:
        """Next latent frames [B, D, P] of B streams -> (audio [B, P * decode_chunk_size], new state).

        The concatenated outputs equal `decode` of the whole sequence; `state` itself is left unchanged.
        """
        buffers = list(state.buffers)
        audio = self.decoder(latents, self._sr_idx(latents.device), buffers)
        return audio.squeeze(1), StreamState(buffers)

    def load_official_state_dict(self, state: Mapping[str, torch.Tensor], strict: bool = True):
        return self.load_state_dict(fold_weight_norm(state), strict=strict)

    def official_state_dict(self) -> dict[str, torch.Tensor]:
        """The state in the official layout: every convolution weight split into `weight_g`/`weight_v`."""
        state = self.state_dict()
        for name, module in self.named_modules():
            if isinstance(module, nn.Conv1d | nn.ConvTranspose1d):
                v = state.pop(f"{name}.weight")
                state[f"{name}.weight_g"] = _norm_except_dim0(v)
                state[f"{name}.weight_v"] = v
        return state


def _norm_except_dim0(v: torch.Tensor) -> torch.Tensor:
    return v.norm(dim=tuple(range(1, v.dim())), keepdim=True)


_WEIGHT_NORM_PAIRS = (
    (".weight_g", ".weight_v"),
    (".parametrizations.weight.original0", ".parametrizations.weight.original1"),
)


def fold_weight_norm(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace each weight-norm pair (g, v) by the plain weight g * v / ||v|| (norm over all dims but 0)."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        for g_suffix, v_suffix in _WEIGHT_NORM_PAIRS:
            base = key.removesuffix(v_suffix)
            if key.endswith(v_suffix) and base + g_suffix in state:
                g = state[base + g_suffix].float()
                out[base + ".weight"] = (value.float() * (g / _norm_except_dim0(value.float()))).to(
                    value.dtype
                )
                break
            if key.endswith(g_suffix) and key.removesuffix(g_suffix) + v_suffix in state:
                break
        else:
            out[key] = value
    return out
