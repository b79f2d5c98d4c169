"""The batched-inference API is batch- and chunk-invariant: packed prefill of several sequences,
chunked prefill, batched decode and advance give what each sequence gets alone."""

from __future__ import annotations

import torch

from polyvox.models.layers.attention import AttentionMetadata
from polyvox.models.prompt import build_prompt

BLOCK = 4


def prompts(tokenizer, config, latents):
    kw = dict(patch_size=config.patch_size, feat_dim=config.feat_dim)
    return [
        build_prompt(tokenizer, "hello world 123", **kw),
        build_prompt(tokenizer, "今天天气很好", reference=latents(6, seed=3), **kw),
        build_prompt(
            tokenizer, "你好 hello", prompt_text="我们喜欢中文。", prompt_audio=latents(4, seed=4), **kw
        ),
    ]


def pack(prompts, lo=None, hi=None):
    lo = lo or [0] * len(prompts)
    hi = hi or [len(p) for p in prompts]
    parts = [
        (p.tokens[a:b], p.text_mask[a:b], p.audio_mask[a:b], p.feats[a:b])
        for p, a, b in zip(prompts, lo, hi, strict=True)
    ]
    return [torch.cat(x) for x in zip(*parts, strict=True)]


def run(model, prompts, tables, steps, patches, noise, cfg):
    """Prefill all `prompts` as one packed batch, then `steps` rounds of decode_patch + advance."""
    base_kv, res_kv = model.make_kv_caches(64, BLOCK)
    lens = [len(p) for p in prompts]
    meta = AttentionMetadata.build([0] * len(prompts), lens, tables, BLOCK)
    lm, res = model.prefill(*pack(prompts), meta, base_kv, res_kv)
    outputs = [(lm, res)]
    prev = torch.stack([p.prev_patch for p in prompts])
    for step in range(steps):
        outputs.append(model.decode_patch(lm, res, prev, noise[step], cfg, 4))
        prev = patches[step]
        meta = AttentionMetadata.build([n + step for n in lens], [1] * len(prompts), tables, BLOCK)
        lm, res = model.advance(prev, meta, base_kv, res_kv)
        outputs.append((lm, res))
    return outputs


def flatten(outputs):
    return [t for o in outputs for t in (o if isinstance(o, tuple) else (o,))]


@torch.inference_mode()
def test_packed_batch_equals_each_sequence_alone(polyvox_lm, tokenizer, tiny_config, latents):
    ps = prompts(tokenizer, tiny_config, latents)
    b, steps = len(ps), 3
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(steps, b, tiny_config.feat_dim, tiny_config.patch_size, generator=g)
    patches = torch.randn(steps, b, tiny_config.patch_size, tiny_config.feat_dim, generator=g)
    cfg = torch.tensor([1.5, 2.0, 3.0])
    # Interleaved, out-of-order blocks: sequence i owns blocks i, i+3, i+6, ... reversed.
    tables = [list(range(i, 60, b))[::-1] for i in range(b)]
    together = flatten(run(polyvox_lm, ps, tables, steps, patches, noise, cfg))
    for i, p in enumerate(ps):
        alone = flatten(
            run(
                polyvox_lm,
                [p],
                [list(range(20))],
                steps,
                patches[:, i : i + 1],
                noise[:, i : i + 1],
                cfg[i : i + 1],
            )
        )
        for t, a in zip(together, alone, strict=True):
            assert (t[i] - a[0]).abs().max() < 1e-4


@torch.inference_mode()
def test_chunked_prefill_equals_one_shot(polyvox_lm, tokenizer, tiny_config, latents):
    prompt = prompts(tokenizer, tiny_config, latents)[2]
    split = len(prompt) // 2 + 1
    table = [list(range(16))]
    cfg = torch.tensor([2.0])
    noise = torch.randn(
        1, tiny_config.feat_dim, tiny_config.patch_size, generator=torch.Generator().manual_seed(1)
    )

    def finish(lm, res, base_kv, res_kv):
        patch = polyvox_lm.decode_patch(lm, res, prompt.prev_patch[None], noise, cfg, 4)
        meta = AttentionMetadata.build([len(prompt)], [1], table, BLOCK)
        return [lm, res, patch, *polyvox_lm.advance(patch, meta, base_kv, res_kv)]

    kv = polyvox_lm.make_kv_caches(16, BLOCK)
    one_shot = finish(
        *polyvox_lm.prefill(*pack([prompt]), AttentionMetadata.build([0], [len(prompt)], table, BLOCK), *kv),
        *kv,
    )

    kv = polyvox_lm.make_kv_caches(16, BLOCK)
    polyvox_lm.prefill(*pack([prompt], hi=[split]), AttentionMetadata.build([0], [split], table, BLOCK), *kv)
    meta = AttentionMetadata.build([split], [len(prompt) - split], table, BLOCK)
    chunked = finish(*polyvox_lm.prefill(*pack([prompt], lo=[split]), meta, *kv), *kv)

    for a, b in zip(one_shot, chunked, strict=True):
        assert (a - b).abs().max() < 1e-4
    assert split % BLOCK != 0  # the split falls inside a KV block


@torch.inference_mode()
def test_guidance_strength_is_per_row(polyvox_lm, tiny_config):
    """One row's cfg_value changes only that row's patch."""
    g = torch.Generator().manual_seed(2)
    h = tiny_config.lm_config.hidden_size
    lm, res = torch.randn(2, h, generator=g), torch.randn(2, h, generator=g)
    prev = torch.randn(2, tiny_config.patch_size, tiny_config.feat_dim, generator=g)
    noise = torch.randn(2, tiny_config.feat_dim, tiny_config.patch_size, generator=g)
    a = polyvox_lm.decode_patch(lm, res, prev, noise, torch.tensor([2.0, 2.0]), 5)
    b = polyvox_lm.decode_patch(lm, res, prev, noise, torch.tensor([2.0, 4.0]), 5)
    assert (a[0] - b[0]).abs().max() < 1e-5
    assert (a[1] - b[1]).abs().max() > 1e-3
