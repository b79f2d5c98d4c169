"""The decoder-state pool: streams keep their own state however slots are gathered, and it grows when full."""

import torch

from polyvox.core.vae_graphs import VAEDecodeGraphs
from polyvox.core.vae_state_pool import VAEStatePool


def test_streams_decoded_through_pool_slots_equal_their_whole_decodes(tiny):
    vae = tiny.vae
    pool = VAEStatePool(vae, capacity=2, device=torch.device("cpu"), dtype=torch.float32)
    latents = [
        torch.randn(1, vae.latent_dim, 12, generator=torch.Generator().manual_seed(i)) for i in range(3)
    ]
    slots = [pool.acquire() for _ in latents]  # the third acquire grows the pool
    assert pool.capacity >= 3 and pool.in_use == 3
    pieces: list[list[torch.Tensor]] = [[], [], []]
    for start in range(0, 12, 4):
        order = [2, 0, 1] if start == 4 else [0, 1, 2]  # gather the batch in a different order each step
        index = torch.tensor([slots[i] for i in order])
        patch = torch.cat([latents[i][..., start : start + 4] for i in order])
        audio, state = vae.decode_stream(patch, pool.gather(index))
        pool.scatter(index, state)
        for row, i in enumerate(order):
            pieces[i].append(audio[row])
    for i, z in enumerate(latents):
        whole = vae.decode(z).reshape(-1)
        assert torch.allclose(torch.cat(pieces[i]), whole, atol=1e-4)
    for slot in slots:
        pool.release(slot)
    assert pool.in_use == 0


def test_a_reused_slot_starts_from_silence(tiny):
    vae = tiny.vae
    pool = VAEStatePool(vae, capacity=1, device=torch.device("cpu"), dtype=torch.float32)
    z = torch.randn(1, vae.latent_dim, 4)
    slot = pool.acquire()
    index = torch.tensor([slot])
    first, state = vae.decode_stream(z, pool.gather(index))
    pool.scatter(index, state)
    pool.release(slot)
    again = pool.acquire()
    assert again == slot
    second, _ = vae.decode_stream(z, pool.gather(torch.tensor([again])))
    assert torch.allclose(first, second)  # no left-over context from the previous stream


def test_the_padded_graph_decode_follows_the_pool_when_it_grows(tiny):
    """Padding rows decode into the scratch slot without touching real streams, and what was set up
    before the pool grew (stale buffers for a captured graph) is set up anew after it."""
    vae = tiny.vae
    pool = VAEStatePool(vae, capacity=1, device=torch.device("cpu"), dtype=torch.float32)
    graphs = VAEDecodeGraphs(vae, pool, max_batch=8, capture=False)
    latents = [
        torch.randn(1, vae.latent_dim, 12, generator=torch.Generator().manual_seed(i)) for i in range(3)
    ]
    slots = [pool.acquire()]
    pieces: list[list[torch.Tensor]] = [[graphs(latents[0][..., :4], slots)[0]], [], []]
    stale = graphs.statics[1]
    slots += [pool.acquire(), pool.acquire()]  # the pool grows
    assert pool.scratch_slot not in slots
    step = graphs(torch.cat([latents[0][..., 4:8], latents[1][..., :4], latents[2][..., :4]]), slots)
    assert step.shape[0] == 3  # run in the bucket of 4, one padding row in the scratch slot
    for i in range(3):
        pieces[i].append(step[i])
    pieces[1].append(graphs(latents[1][..., 4:8], slots[1:2])[0])  # the bucket of 1 again
    assert graphs.statics[1] is not stale
    for i, length in ((0, 8), (1, 8), (2, 4)):
        whole = vae.decode(latents[i][..., :length]).reshape(-1)
        assert torch.allclose(torch.cat(pieces[i]), whole, atol=1e-4)


def test_a_voice_tail_is_decoded_once_and_every_request_of_it_starts_from_the_same_state(tiny):
    """A continuation's slot is primed with its prompt's audio tail: the same tail (a voice's, on every
    request) is decoded once and copied after; each slot then decodes exactly as one primed alone."""
    vae = tiny.vae
    pool = VAEStatePool(vae, capacity=4, device=torch.device("cpu"), dtype=torch.float32)

    def tail(seconds: float, freq: float = 220.0) -> torch.Tensor:
        clip = tiny.clip_patches(seconds, freq=freq)
        return tiny.prompt("and on", prompt_text="It went ", prompt_audio=clip).context_patches

    def next_audio(state) -> torch.Tensor:
        z = torch.randn(1, vae.latent_dim, 4, generator=torch.Generator().manual_seed(5))
        return vae.decode_stream(z, state)[0]

    def primed_alone(context: torch.Tensor) -> torch.Tensor:
        latents = context.flatten(0, 1).T.unsqueeze(0).contiguous()
        _, state = vae.decode_stream(latents, vae.init_stream_state(1, torch.device("cpu"), torch.float32))
        return next_audio(state)

    voice, other = tail(0.64), tail(0.48, freq=330.0)
    slots = [pool.acquire_primed(voice), pool.acquire_primed(voice.clone()), pool.acquire_primed(other)]
    assert len(pool.primed) == 2  # the voice's tail was decoded once
    audio = [next_audio(pool.gather(torch.tensor([slot]))) for slot in slots]
    assert torch.equal(audio[0], primed_alone(voice)) and torch.equal(audio[1], audio[0])
    assert torch.equal(audio[2], primed_alone(other)) and not torch.equal(audio[2], audio[0])
