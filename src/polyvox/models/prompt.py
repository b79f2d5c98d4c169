"""Prompt layouts of every mode a VoxCPM release has, as token ids + masks + latent patches (a family's
`build_prompt` picks the modes it has).

zero-shot `[text…, 101]`; voice design puts "(description)" before the text; reference cloning
`[103, ref-audio…, 104, text…, 101]`; continuation `[prompt_text+text…, 101, prompt-audio…]`;
and reference + continuation combined. Audio features are `[T, P, D]` latent patches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

AUDIO_START_TOKEN = 101
AUDIO_END_TOKEN = 102
REF_AUDIO_START_TOKEN = 103
REF_AUDIO_END_TOKEN = 104

STREAMING_PREFIX_LEN = 4


@dataclass
class Prompt:
    tokens: torch.Tensor  # Long[N] text ids (0 at audio positions)
    text_mask: torch.Tensor  # Long[N] 1 at text positions
    audio_mask: torch.Tensor  # Long[N] 1 at audio positions
    feats: torch.Tensor  # float32[N, P, D] latent patches (zeros at text positions)
    context_patches: torch.Tensor  # float32[C, P, D] trailing prompt audio the VAE decode is primed with
    target_text_len: int  # tokens of the text to speak (with any design description), for the length cap

    def __len__(self) -> int:
        return self.tokens.shape[0]

    @property
    def prev_patch(self) -> torch.Tensor:
        """The LocDiT's previous-patch condition for the first generated patch: `[P, D]`."""
        return self.feats[-1]


def design_text(text: str, description: str | None) -> str:
    """Voice design: the description in parentheses before the text."""
    description = (description or "").strip()
    return f"({description}){text}" if description else text


def _segment(tokens: list[int], feats: torch.Tensor | None, is_audio: bool, shape: tuple[int, int]):
    n = len(tokens) if feats is None else feats.shape[0]
    ids = torch.tensor(tokens, dtype=torch.long) if feats is None else torch.zeros(n, dtype=torch.long)
    patches = torch.zeros(n, *shape) if feats is None else feats.float()
    audio = torch.full((n,), int(is_audio), dtype=torch.long)
    return ids, patches, 1 - audio, audio


def build_prompt(
    tokenize: Callable[[str], list[int]],
    text: str,
    *,
    patch_size: int,
    feat_dim: int,
    description: str | None = None,
    reference: torch.Tensor | None = None,
    prompt_text: str | None = None,
    prompt_audio: torch.Tensor | None = None,
    streaming_prefix_len: int = STREAMING_PREFIX_LEN,
) -> Prompt:
    """The prompt for `text`.

    `reference` `[T, P, D]` clones a voice in isolation; `prompt_text` + `prompt_audio` continue
    from a transcribed clip (both or neither); `description` designs a voice from words.
    """
    if (prompt_text is None) != (prompt_audio is None):
        raise ValueError("prompt_text and prompt_audio go together")
    shape = (patch_size, feat_dim)
    for name, feats in (("reference", reference), ("prompt_audio", prompt_audio)):
        if feats is not None and (feats.dim() != 3 or tuple(feats.shape[1:]) != shape or feats.shape[0] == 0):
            raise ValueError(f"{name} must be non-empty latent patches [T, {patch_size}, {feat_dim}]")

    target = design_text(text, description)
    spoken = (prompt_text or "") + target
    segments = []
    if reference is not None:
        segments += [
            _segment([REF_AUDIO_START_TOKEN], None, False, shape),
            _segment([], reference, True, shape),
            _segment([REF_AUDIO_END_TOKEN], None, False, shape),
        ]
    segments.append(_segment(list(tokenize(spoken)) + [AUDIO_START_TOKEN], None, False, shape))
    if prompt_audio is not None:
        segments.append(_segment([], prompt_audio, True, shape))
    tokens, feats, text_mask, audio_mask = (torch.cat(parts) for parts in zip(*segments, strict=True))

    context = feats[:0]
    if audio_mask[-1] == 1 and streaming_prefix_len > 1:
        audio_positions = audio_mask.nonzero().squeeze(1)
        context = feats[audio_positions[-min(streaming_prefix_len - 1, len(audio_positions)) :]]
    return Prompt(tokens, text_mask, audio_mask, feats, context, len(tokenize(target)))
