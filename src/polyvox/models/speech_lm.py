"""SpeechLM: everything of a VoxCPM release but the AudioVAE, driven through the batched-inference API
(`prefill`, `decode_patch`, `stop_logits`, `advance`) that both the batch-1 generator and the
continuous-batching engine call: two MiniCPM4 stacks (base and residual LM), LocEnc, the LocDiT solve,
FSQ and the stop head, built of the shared layers (`models/layers/`). A family's LM
(`models/voxcpm2/model.py` VoxCPM2LM, `models/voxcpm1/model.py` VoxCPM1LM) is a SpeechLM with its LocDiT
window, its fusion layers and the two fusions (`residual_input`, `dit_condition`). Parameter names are the
official ones, so an official state_dict (minus `audio_vae.*`) loads unchanged.

Each entry point takes `adapters`, the LoRA adapter slot of every sequence (`lora` is the model's
`AdapterBank`, set when adapters are served; None: the base model), and names the rows of each part's
input for the bank.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import ClassVar

import torch
from torch import nn

from polyvox.models.layers.attention import AttentionMetadata
from polyvox.models.layers.cfm import UnifiedCFM
from polyvox.models.layers.fsq import ScalarQuantizationLayer
from polyvox.models.layers.kv_cache import PagedKVCache
from polyvox.models.layers.locdit import LocDiT
from polyvox.models.layers.locenc import LocEnc
from polyvox.models.layers.minicpm4 import MiniCPM4Model
from polyvox.models.lora.bank import AdapterBank
from polyvox.models.speech_config import SpeechConfig


class SpeechLM(nn.Module):
    """See the module docstring: a family's LM is this with its LocDiT window and its two fusions."""

    # The official LoRAConfig's default projection targets (a family's own), and the LocDiT layers that
    # run once per step for every row together (the time embeddings), where no per-row adapter can act.
    lora_default_proj: ClassVar[list[str]]
    lora_shared_rows = ("feat_decoder.estimator.time_mlp.", "feat_decoder.estimator.delta_time_mlp.")

    def __init__(self, config: SpeechConfig) -> None:
        super().__init__()
        self.config = config
        self.patch_size = config.patch_size
        self.feat_dim = config.feat_dim
        lm = config.lm_config
        hidden = lm.hidden_size
        self.scale_emb = lm.scale_emb if lm.use_mup else 1.0

        self.base_lm = MiniCPM4Model(lm)
        self.residual_lm = MiniCPM4Model(config.residual_lm_config)
        self.feat_encoder = LocEnc(config.local_config(config.encoder_config), config.feat_dim)
        self.feat_decoder = UnifiedCFM(
            LocDiT(config.local_config(config.dit_config), config.feat_dim, self.dit_window)
        )
        self.fsq_layer = ScalarQuantizationLayer(
            hidden, hidden, config.scalar_quantization_latent_dim, config.scalar_quantization_scale
        )
        self.enc_to_lm_proj = nn.Linear(config.encoder_config.hidden_dim, hidden)
        self.lm_to_dit_proj = nn.Linear(hidden, config.dit_config.hidden_dim)
        self.res_to_dit_proj = nn.Linear(hidden, config.dit_config.hidden_dim)
        for name, layer in self.fusion_layers(hidden).items():  # made here, as the official models do
            self.add_module(name, layer)
        self.stop_proj = nn.Linear(hidden, hidden)
        self.stop_actn = nn.SiLU()
        self.stop_head = nn.Linear(hidden, 2, bias=False)
        self.lora: AdapterBank | None = None

    def serve_adapters(self, max_loaded: int, max_rank: int, hook_all: bool = False) -> AdapterBank:
        """The model's adapter bank (made on first call): `max_loaded` device slots of rank `max_rank`
        (`hook_all`: see AdapterBank)."""
        if self.lora is None:
            self.lora = AdapterBank(
                self,
                max_loaded=max_loaded,
                max_rank=max_rank,
                default_proj=self.lora_default_proj,
                shared_rows=self.lora_shared_rows,
                hook_all=hook_all,
            )
        return self.lora

    def _rows(self, adapters: torch.Tensor | None) -> AbstractContextManager[None]:
        return nullcontext() if self.lora is None or adapters is None else self.lora.rows(adapters)

    @property
    def dtype(self) -> torch.dtype:
        return self.stop_head.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.stop_head.weight.device

    def make_kv_caches(self, num_blocks: int, block_size: int) -> tuple[PagedKVCache, PagedKVCache]:
        """One pool per LM, same block geometry (one block table serves both)."""
        return (
            self.base_lm.make_kv_cache(num_blocks, block_size, self.dtype, self.device),
            self.residual_lm.make_kv_cache(num_blocks, block_size, self.dtype, self.device),
        )

    def embed_patches(self, patches: torch.Tensor, adapters: torch.Tensor | None = None) -> torch.Tensor:
        """LocEnc + enc_to_lm_proj: `[N, P, D]` -> `[N, hidden]`."""
        encoded = self.feat_encoder(patches.to(self.dtype))
        with self._rows(adapters):
            return self.enc_to_lm_proj(encoded)

    def prefill(
        self,
        tokens: torch.Tensor,
        text_mask: torch.Tensor,
        audio_mask: torch.Tensor,
        feats: torch.Tensor,
        meta: AttentionMetadata,
        base_kv: PagedKVCache,
        res_kv: PagedKVCache,
        adapters: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run a packed batch of prompt pieces; hidden states `[B, H]` of each sequence's last token."""
        token_adapters = None
        if adapters is not None:  # one slot per sequence -> one per token
            lengths = meta.query_start_loc[1:] - meta.query_start_loc[:-1]
            token_adapters = adapters.repeat_interleave(lengths, output_size=tokens.shape[0])
        with self._rows(token_adapters):
            return self._prefill(tokens, text_mask, audio_mask, feats, meta, base_kv, res_kv, token_adapters)

    def _prefill(
        self,
        tokens: torch.Tensor,
        text_mask: torch.Tensor,
        audio_mask: torch.Tensor,
        feats: torch.Tensor,
        meta: AttentionMetadata,
        base_kv: PagedKVCache,
        res_kv: PagedKVCache,
        token_adapters: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        text_mask = text_mask.to(self.dtype).unsqueeze(-1)
        audio_mask = audio_mask.to(self.dtype).unsqueeze(-1)
        is_audio = audio_mask.squeeze(-1) != 0
        feat_embed = torch.zeros(
            tokens.shape[0], self.config.lm_config.hidden_size, dtype=self.dtype, device=self.device
        )
        if bool(is_audio.any()):
            audio_adapters = None if token_adapters is None else token_adapters[is_audio]
            feat_embed[is_audio] = self.embed_patches(feats[is_audio], audio_adapters)
        text_embed = self.base_lm.embed_tokens(tokens) * self.scale_emb
        embeds = text_mask * text_embed + audio_mask * feat_embed

        lm_out = self.base_lm(embeds, meta, base_kv)
        lm_out = self.fsq_layer(lm_out) * audio_mask + lm_out * text_mask
        residual_out = self.residual_lm(self.residual_input(lm_out, audio_mask * feat_embed), meta, res_kv)
        last = meta.query_start_loc[1:] - 1
        return lm_out[last], residual_out[last]

    def decode_patch(
        self,
        lm_hidden: torch.Tensor,
        residual_hidden: torch.Tensor,
        prev_patch: torch.Tensor,
        noise: torch.Tensor,
        cfg_value: torch.Tensor,
        timesteps: int,
        adapters: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The next patch `[B, P, D]` of each sequence; `noise [B, D, P]` is already temperature-scaled."""
        with self._rows(adapters):
            mu = self.dit_condition(lm_hidden, residual_hidden)
        cond = prev_patch.to(self.dtype).transpose(1, 2)
        # the CFM solve runs the conditioned rows, then the unconditioned ones: each sequence twice
        with self._rows(None if adapters is None else torch.cat((adapters, adapters))):
            return self.feat_decoder(mu, cond, noise, cfg_value, timesteps).transpose(1, 2)

    def stop_logits(self, lm_hidden: torch.Tensor, adapters: torch.Tensor | None = None) -> torch.Tensor:
        """`[B, 2]`; argmax 1 means "stop after this patch"."""
        with self._rows(adapters):
            return self.stop_head(self.stop_actn(self.stop_proj(lm_hidden)))

    def advance(
        self,
        patch: torch.Tensor,
        meta: AttentionMetadata,
        base_kv: PagedKVCache,
        res_kv: PagedKVCache,
        adapters: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed each sequence's newest patch `[B, P, D]` back through both LMs (one token each)."""
        with self._rows(adapters):
            embed = self.embed_patches(patch, adapters)
            lm_hidden = self.fsq_layer(self.base_lm(embed, meta, base_kv))
            return lm_hidden, self.residual_lm(self.residual_input(lm_hidden, embed), meta, res_kv)

    # Where the families differ: how the residual LM's input and the LocDiT's conditioning are fused

    @staticmethod
    def dit_window(
        mu_tokens: torch.Tensor, time: torch.Tensor, cond_tokens: torch.Tensor, rows: int
    ) -> list[torch.Tensor]:
        """The family's LocDiT window: the tokens in front of the noisy patch (`Window`)."""
        raise NotImplementedError

    def fusion_layers(self, hidden: int) -> dict[str, nn.Module]:
        """The family's fusion layers (official names), made after the LocDiT projections: seeded
        initialisation draws in the official models' order."""
        return {}

    def residual_input(self, lm_out: torch.Tensor, feat_embed: torch.Tensor) -> torch.Tensor:
        """The residual LM's input from the base LM's output and the patch embedding (zero at text)."""
        raise NotImplementedError

    def dit_condition(self, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor) -> torch.Tensor:
        """The LocDiT's conditioning `mu` from both LMs' hidden states."""
        raise NotImplementedError
