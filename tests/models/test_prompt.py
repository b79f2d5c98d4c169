"""Prompt layouts equal what the official generation feeds its inference loop, in every mode."""

from __future__ import annotations

import pytest
import torch

from polyvox.models.generate import capped_max_len
from polyvox.models.prompt import build_prompt

from .test_parity import mode_inputs

MODES = ["zero_shot", "design", "reference", "continuation", "reference_continuation"]


class _Captured(Exception):
    pass


def official_inference_inputs(official, target_text, cache):
    """The (tokens, text_mask, feats, audio_mask, max_len) the official `_generate_with_prompt_cache`
    passes to `_inference`, and the context patches its streaming loop starts from."""
    captured = {}
    inner = official._inference

    def record(text, text_mask, feat, feat_mask, **kw):
        captured.update(tokens=text[0], text_mask=text_mask[0], feats=feat[0], audio_mask=feat_mask[0], **kw)
        raise _Captured

    official._inference = record
    try:
        with pytest.raises(_Captured):
            official.generate_with_prompt_cache(target_text=target_text, prompt_cache=cache, max_len=2000)
    finally:
        del official._inference
    c = captured
    stream = inner(
        c["tokens"][None],
        c["text_mask"][None],
        c["feats"][None],
        c["audio_mask"][None],
        max_len=1,
        streaming=True,
    )
    _, seq, _ = next(stream)
    stream.close()
    captured["context"] = torch.cat(seq[:-1], dim=1)[0] if len(seq) > 1 else None
    return captured


@pytest.mark.parametrize("mode", MODES)
def test_layout_matches_official(mode, official_lm, tokenizer, tiny_config, latents):
    prompt_kw, target, cache = mode_inputs(mode, latents)
    expected = official_inference_inputs(official_lm, target, cache)
    text = "你好世界，今天天气很好 hello world 123"
    prompt = build_prompt(
        tokenizer, text, patch_size=tiny_config.patch_size, feat_dim=tiny_config.feat_dim, **prompt_kw
    )
    assert prompt.tokens.tolist() == expected["tokens"].tolist()
    assert prompt.text_mask.tolist() == expected["text_mask"].tolist()
    assert prompt.audio_mask.tolist() == expected["audio_mask"].tolist()
    assert torch.equal(prompt.feats, expected["feats"])
    assert capped_max_len(prompt, 2000) == expected["max_len"]
    if expected["context"] is None:
        assert len(prompt.context_patches) == 0
    else:
        assert torch.equal(prompt.context_patches, expected["context"])


def test_special_tokens_frame_the_audio(tokenizer, tiny_config, latents):
    ref, audio = latents(2, seed=1), latents(5, seed=2)
    p = build_prompt(
        tokenizer,
        "hi",
        patch_size=4,
        feat_dim=tiny_config.feat_dim,
        reference=ref,
        prompt_text="ok",
        prompt_audio=audio,
    )
    text_ids = tokenizer.encode("okhi")
    assert p.tokens.tolist() == [103, 0, 0, 104, *text_ids, 101] + [0] * 5
    assert p.audio_mask.tolist() == [0, 1, 1, 0] + [0] * (len(text_ids) + 1) + [1] * 5
    assert torch.equal(p.prev_patch, audio[-1])
    assert torch.equal(p.context_patches, audio[-3:])


def test_prompt_audio_needs_its_text(tokenizer, tiny_config, latents):
    with pytest.raises(ValueError):
        build_prompt(
            tokenizer, "hi", patch_size=4, feat_dim=tiny_config.feat_dim, prompt_audio=latents(2, seed=1)
        )
    with pytest.raises(ValueError):
        build_prompt(
            tokenizer, "hi", patch_size=4, feat_dim=tiny_config.feat_dim, reference=torch.zeros(2, 4, 3)
        )
