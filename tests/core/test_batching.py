"""Continuous batching on a tiny random VoxCPM2: a request's output does not depend on its company,
on preemption, or on where its prompt KV came from; every KV block returns to the pool."""

from __future__ import annotations

import pytest
import torch

from polyvox.core.graphs import AdvanceGraphs
from polyvox.core.sequence import SamplingParams, SequenceStatus
from polyvox.core.vae_graphs import VAEDecodeGraphs
from polyvox.models.generate import generate_latent_sequence

ATOL = 1e-4


def assert_same(got, want):
    assert got[0].shape == want[0].shape
    assert torch.allclose(got[0], want[0], atol=ATOL, rtol=0), (got[0] - want[0]).abs().max()
    if got[1].size:
        assert abs(got[1] - want[1]).max() <= ATOL


def test_outputs_in_a_mixed_batch_equal_outputs_alone_even_with_cancellations(tiny, mixed):
    requests, alone = mixed
    core = tiny.core(max_num_batched_tokens=64)  # prompts are prefilled in chunks alongside decodes
    seqs = [core.add_request(p, sp) for p, sp in requests]
    doomed = [
        core.add_request(tiny.prompt("I will be cancelled."), SamplingParams(seed=9, max_len=20))
        for _ in range(2)
    ]
    got = {s.seq_id: ([], []) for s in seqs}
    steps = 0
    while core.has_work():
        for out in core.step():
            if out.seq_id in got:
                got[out.seq_id][0].append(out.latent)
                got[out.seq_id][1].append(out.audio)
        steps += 1
        if steps == 3:
            for d in doomed:
                core.abort(d.seq_id)
                assert d.block_table == [] and d.status is SequenceStatus.FINISHED
    assert core.stats().mean_batch_size > 4
    for s, want in zip(seqs, alone, strict=True):
        lat, audio = got[s.seq_id]
        assert_same((torch.cat(lat, dim=1), torch.cat([torch.as_tensor(a) for a in audio]).numpy()), want)
    assert core.block_manager.num_free == core.block_manager.num_blocks
    assert core.runner.vae_pool.in_use == 0  # every decoder state slot is back too


@pytest.mark.parametrize("policy", ["separate", "adaptive"])
def test_prompt_only_steps_give_the_same_outputs(tiny, mixed, policy):
    requests, alone = mixed
    core = tiny.core(max_num_batched_tokens=64, prefill_policy=policy)
    seqs = [core.add_request(p, sp) for p, sp in requests[:3]]
    got = {s.seq_id: [] for s in seqs}
    for out in core.step():  # three requests running; the rest arrive while they generate
        got[out.seq_id].append(out.latent)
    seqs += [core.add_request(p, sp) for p, sp in requests[3:]]
    got.update({s.seq_id: [] for s in seqs[3:]})
    while core.has_work():
        for out in core.step():
            got[out.seq_id].append(out.latent)
    for s, want in zip(seqs, alone, strict=True):
        assert torch.allclose(torch.cat(got[s.seq_id], dim=1), want[0], atol=ATOL, rtol=0)
    assert core.block_manager.num_free == core.block_manager.num_blocks


def test_each_patch_streams_as_one_160ms_chunk_at_48khz(tiny):
    core = tiny.core()
    seq = core.add_request(tiny.prompt("Three."), SamplingParams(seed=1, min_len=3, max_len=3))
    chunks = []
    while core.has_work():
        chunks += [o.audio for o in core.step() if o.seq_id == seq.seq_id]
    assert [len(c) for c in chunks] == [7680, 7680, 7680]


def test_preempted_requests_resume_with_identical_output(tiny, mixed):
    requests, alone = mixed
    core = tiny.core(num_kv_blocks=16, enable_prefix_caching=False)
    got = core.generate([p for p, _ in requests], [sp for _, sp in requests])
    assert core.stats().preemptions > 0  # and their streaming-decoder state waited for them
    for g, want in zip(got, alone, strict=True):
        assert_same(g, want)
    assert core.block_manager.num_free == core.block_manager.num_blocks
    assert core.runner.vae_pool.in_use == 0  # every decoder state slot is back too


def test_a_prefix_cache_hit_gives_the_same_output_as_a_miss(tiny):
    ref = tiny.clip_patches(0.96)
    first = tiny.prompt("One voice.", reference=ref)
    second = tiny.prompt("Another sentence, same voice.", reference=ref)
    params = SamplingParams(seed=11, min_len=6, max_len=6)
    miss = tiny.core(enable_prefix_caching=False, decode_audio=False).generate([second], [params])[0]
    core = tiny.core(decode_audio=False)
    core.generate([first], [SamplingParams(seed=1, max_len=3)])
    assert core.stats().prefix_cache_hits == 0
    hit = core.generate([second], [params])[0]
    stats = core.stats()
    assert stats.prefix_cache_hits >= len(ref) // 4  # the reference's blocks came from the cache
    assert 0 < stats.prefix_cache_hit_rate <= 1
    assert_same(hit, miss)
    assert core.block_manager.num_free == core.block_manager.num_blocks
    assert core.runner.vae_pool.in_use == 0  # every decoder state slot is back too


def test_same_seed_same_output_different_seed_different_output(tiny):
    core = tiny.core(decode_audio=False)
    p = tiny.prompt("Seeded.")
    a, b, c = core.generate(
        [p, p, p],
        [SamplingParams(seed=5, max_len=4, min_len=4)] * 2 + [SamplingParams(seed=6, max_len=4, min_len=4)],
    )
    # Same seed, same noise: equal up to float rounding (rows of one batch may take different
    # multi-threaded CPU kernel paths, so bitwise equality is not promised); another seed differs.
    torch.testing.assert_close(a[0], b[0], atol=1e-4, rtol=0)
    assert (a[0] - c[0]).abs().max() > 1e-2


def test_stop_head_ends_a_request_only_after_min_len(tiny):
    core = tiny.core()
    with torch.no_grad():
        saved = tiny.lm.stop_head.weight.clone()
        tiny.lm.stop_head.weight.zero_()
        tiny.lm.stop_head.weight[1].fill_(1.0)  # the stop class always wins unless the projection is negative
        tiny.lm.stop_proj.bias.add_(100.0)
    try:
        latents, _ = core.generate(
            [tiny.prompt("Stop me.")], [SamplingParams(seed=1, min_len=3, max_len=50)]
        )[0]
    finally:
        with torch.no_grad():
            tiny.lm.stop_head.weight.copy_(saved)
            tiny.lm.stop_proj.bias.sub_(100.0)
    # like the official loop: patch i may stop only when i > min_len, and the stopping patch is kept
    assert latents.shape[1] == (3 + 2) * tiny.config.patch_size


def test_engine_output_equals_the_batch_1_reference_generator(tiny, mixed):
    requests, _ = mixed
    core = tiny.core(max_num_batched_tokens=48, decode_audio=False)
    got = core.generate([p for p, _ in requests], [sp for _, sp in requests])
    for (prompt, sp), (latents, _) in zip(requests, got, strict=True):
        want = generate_latent_sequence(
            tiny.lm,
            prompt,
            cfg_value=sp.cfg_value,
            inference_timesteps=sp.inference_timesteps,
            temperature=sp.temperature,
            min_len=sp.min_len,
            max_len=sp.max_len,
            seed=sp.seed,
        )
        assert latents.shape == want.shape
        assert torch.allclose(latents, want, atol=ATOL, rtol=0), (latents - want).abs().max()


def test_continuation_audio_is_decoded_after_the_prompt_tail_like_the_whole_utterance(tiny):
    prompt = tiny.prompt("and on", prompt_text="It went ", prompt_audio=tiny.clip_patches(0.64))
    latents, audio = tiny.core().generate([prompt], [SamplingParams(seed=3, min_len=5, max_len=5)])[0]
    context = prompt.context_patches.flatten(0, 1).T
    whole = tiny.vae.decode(torch.cat([context, latents], dim=1).unsqueeze(0)).reshape(-1)
    skip = context.shape[1] * tiny.vae.decode_chunk_size
    assert len(audio) == len(whole) - skip
    assert abs(audio - whole[skip:].numpy()).max() < 1e-4


def test_the_fixed_shape_advance_used_by_cuda_graphs_gives_the_same_output(tiny, mixed):
    """The padded path CUDA graphs replay (bucketed batch, scratch block, wide tables), run eagerly here."""
    requests, alone = mixed
    core = tiny.core(max_num_batched_tokens=64, decode_audio=False, max_graph_batch=16)
    runner = core.runner
    runner.advance_graphs = AdvanceGraphs(
        tiny.lm, runner.base_kv, runner.res_kv, runner.block_size, runner.num_kv_blocks, 16, capture=False
    )
    got = core.generate([p for p, _ in requests], [sp for _, sp in requests])
    assert len(runner.advance_graphs.statics) > 1  # several batch buckets were exercised
    for g, want in zip(got, alone, strict=True):
        assert_same(g, want)
    assert core.block_manager.num_free == core.block_manager.num_blocks
    assert core.runner.vae_pool.in_use == 0  # every decoder state slot is back too


def test_the_padded_vae_decode_used_by_cuda_graphs_gives_the_same_audio(tiny, mixed):
    """The padded decode CUDA graphs replay (bucketed batch, padding rows in the scratch slot), run
    eagerly here: every stream's audio is its audio alone, continuations included."""
    requests, alone = mixed
    core = tiny.core(max_num_batched_tokens=64, max_graph_batch=16)
    runner = core.runner
    runner.vae_graphs = VAEDecodeGraphs(tiny.vae, runner.vae_pool, 16, capture=False)
    got = core.generate([p for p, _ in requests], [sp for _, sp in requests])
    assert len(runner.vae_graphs.statics) > 1  # several batch buckets were exercised
    for g, want in zip(got, alone, strict=True):
        assert_same(g, want)
    assert core.runner.vae_pool.in_use == 0


def test_a_request_that_never_stops_ends_at_the_last_position_the_lm_has(tiny_with):
    """An LM has so many positions (its RoPE table: 96 here, in place of the tiny model's 512 and
    their 500 steps); a request asking for more, with a stop head that is not allowed to fire, ends
    there with reason "length" and the engine goes on serving."""
    positions = 96
    tiny = tiny_with(
        lm={
            "max_position_embeddings": positions,
            "rope_scaling": {"original_max_position_embeddings": positions},
        }
    )
    assert tiny.config.lm_config.max_position_embeddings == positions
    core = tiny.core(decode_audio=False)
    prompt = tiny.prompt("Keep talking.")
    seq = core.add_request(prompt, SamplingParams(seed=1, min_len=5000, max_len=5000))
    room = tiny.config.lm_config.max_position_embeddings - len(prompt)
    outputs = []
    while core.has_work():
        outputs += core.step()
    assert len(outputs) == room and outputs[-1].finish_reason == "length"
    assert seq.status is SequenceStatus.FINISHED
    latents, _ = core.generate([prompt], [SamplingParams(seed=2, min_len=3, max_len=3)])[0]
    assert latents.shape[-1] == 3 * tiny.config.patch_size  # still serving: three more patches
    assert core.block_manager.num_free == core.block_manager.num_blocks


def test_a_prompt_that_fills_every_position_is_refused(tiny):
    core = tiny.core(decode_audio=False)
    words = " ".join(["word"] * tiny.config.lm_config.max_position_embeddings)
    with pytest.raises(ValueError, match="no room"):
        core.add_request(tiny.prompt(words), SamplingParams(seed=1))
