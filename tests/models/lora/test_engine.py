"""The batching engine runs requests with different adapters, and without one, in the same batch: each
gets what it gets alone; adapter slots are pinned while used, evicted least recently used beyond
`max_loaded`, and the prefix cache never hands one adapter's K/V to another."""

from __future__ import annotations

import pytest
import torch

from polyvox.core.config import BatchingConfig
from polyvox.core.core import EngineCore
from polyvox.core.errors import EngineInputError
from polyvox.core.sequence import SamplingParams
from polyvox.models.layers.audio_vae import AudioVAE
from polyvox.models.layers.audio_vae_config import AudioVAEConfig
from polyvox.models.lora.bank import SlotsBusy
from polyvox.models.prompt import build_prompt

TOL = 1e-4


def make_core(lm, config, **kw) -> EngineCore:
    kw = {"kv_block_size": 4, "num_kv_blocks": 256, "decode_audio": False, **kw}
    vae = AudioVAE(AudioVAEConfig.from_dict(config.audio_vae_config)).eval()
    return EngineCore(lm, vae, config, BatchingConfig(**kw), torch.device("cpu"), torch.float32)


@pytest.fixture
def prompts(tokenizer, tiny_config, latents):
    kw = dict(patch_size=tiny_config.patch_size, feat_dim=tiny_config.feat_dim)
    return {
        "plain": build_prompt(tokenizer, "hello world, a longer line of text", **kw),
        "clone": build_prompt(tokenizer, "今天天气很好", reference=latents(6, seed=3), **kw),
        "continue": build_prompt(
            tokenizer, "你好 hello", prompt_text="我们喜欢中文。", prompt_audio=latents(4, seed=4), **kw
        ),
    }


def params(adapter, seed, n=6):
    return SamplingParams(seed=seed, min_len=n, max_len=n, inference_timesteps=4, adapter=adapter)


def test_a_mixed_batch_gives_each_request_what_it_gets_alone(serving_lm, tiny_config, prompts):
    requests = [
        (prompts["plain"], params("lm_dit", 1)),
        (prompts["clone"], params("everywhere", 2)),
        (prompts["plain"], params(None, 1)),
        (prompts["continue"], params("lm_dit_2", 3)),
        (prompts["clone"], params(None, 2)),
        (prompts["continue"], params("everywhere", 3)),
    ]
    alone = [make_core(serving_lm, tiny_config).generate([p], [sp])[0][0] for p, sp in requests]
    core = make_core(serving_lm, tiny_config, max_num_batched_tokens=48)  # chunked prefill beside decodes
    together = [latent for latent, _ in core.generate(*map(list, zip(*requests, strict=True)))]
    assert core.stats().mean_batch_size > 4
    for got, want in zip(together, alone, strict=True):
        assert got.shape == want.shape
        assert (got - want).abs().max() < TOL
    # the same prompt and seed with and without an adapter (and with another one) really differ
    assert (alone[0] - alone[2]).abs().max() > 1e-2
    assert (alone[3] - alone[5]).abs().max() > 1e-2
    assert serving_lm.lora.pinned() == 0  # every finished request gave its slot's pin back


def test_the_prefix_cache_keeps_each_adapters_kv_apart(serving_lm, tiny_config, prompts):
    prompt = prompts["clone"]  # several full blocks of reference audio: cacheable
    alone = make_core(serving_lm, tiny_config, enable_prefix_caching=False).generate(
        [prompt], [params("lm_dit", 5)]
    )[0][0]
    core = make_core(serving_lm, tiny_config)
    core.generate([prompt], [params(None, 5)])  # fills the cache with the base model's K/V
    got = core.generate([prompt], [params("lm_dit", 5)])[0][0]
    assert (got - alone).abs().max() < TOL
    again = core.generate([prompt], [params("lm_dit", 6)])  # now a hit, under the same adapter
    assert core.stats().prefix_cache_hits > 0
    assert again[0][0].shape[1] > 0


def test_adapters_beyond_the_slots_are_evicted_least_recently_used(official_lm, tiny_config, adapter_dirs):
    from ..conftest import polyvox_twin

    model = polyvox_twin(official_lm, tiny_config)
    bank = model.serve_adapters(max_loaded=2, max_rank=8)
    for name, directory in adapter_dirs.items():
        bank.register(name, directory)
    a = bank.acquire("lm_dit")
    b = bank.acquire("everywhere")
    with pytest.raises(SlotsBusy, match="lm_dit_2.*all 2 adapter slots"):
        bank.acquire("lm_dit_2")  # both slots pinned by running requests
    bank.release(a)
    bank.release(b)
    bank.release(bank.acquire("lm_dit"))  # lm_dit is now the most recently used
    c = bank.acquire("lm_dit_2")
    assert c.slot == b.slot  # "everywhere", least recently used, was evicted
    assert bank.resident() == ["lm_dit", "lm_dit_2"]
    bank.release(c)


def test_a_request_for_an_adapter_not_loaded_is_refused(serving_lm, tiny_config, prompts):
    core = make_core(serving_lm, tiny_config)
    with pytest.raises(EngineInputError, match="no LoRA adapter 'nobody' is loaded"):
        core.add_request(prompts["plain"], params("nobody", 1))
    assert not core.has_work()


def test_an_adapter_loaded_after_compiling_acts_in_compiled_code(official_lm, tiny_config, adapter_dirs):
    """Compiled code runs only the hooks it was traced with: a bank made for a compiled engine hooks every
    layer up front, so an adapter registered after the LocDiT's velocity (what the engine compiles) was
    compiled and run still acts there, row by row, as it does eagerly."""
    from ..conftest import polyvox_twin

    lm = polyvox_twin(official_lm, tiny_config)
    bank = lm.serve_adapters(max_loaded=2, max_rank=8, hook_all=True)
    estimator = lm.feat_decoder.estimator
    compiled = torch.compile(estimator.velocity, backend="eager", dynamic=False)
    generator = torch.Generator().manual_seed(0)
    rows, dim, patch, hidden = 2, tiny_config.feat_dim, tiny_config.patch_size, estimator.hidden_size
    x = torch.randn(rows, dim, patch, generator=generator)
    t = torch.tensor([0.3, 0.7])
    with torch.inference_mode():
        condition = estimator.condition(
            torch.randn(rows, hidden, generator=generator),
            torch.randn(rows, dim, patch, generator=generator),
            torch.full((rows,), 0.1),
        )
        base = compiled(x, t, condition)  # compiled and run before any adapter exists
        bank.register("lm_dit", adapter_dirs["lm_dit"])
        use = bank.acquire("lm_dit")
        slots = torch.tensor([use.slot, 0])  # row 0 with the adapter, row 1 without
        with bank.rows(slots):
            got = compiled(x, t, condition)
            want = type(estimator).velocity(estimator, x, t, condition)  # eager
    assert (got - want).abs().max() < TOL
    assert (got[0] - base[0]).abs().max() > 1e-3  # the adapter changed row 0 ...
    assert (got[1] - base[1]).abs().max() < TOL  # ... and only row 0
