"""VoxCPM2's loaded model end to end: a checkpoint written by the official package's own classes loads in
polyvox, polyvox's `synthesize` gives the official `generate`'s waveform for the same seed, and
`polyvox say` / `polyvox serve` speak with it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import av
import httpx
import numpy as np
import openai
import pytest
import torch
from safetensors.torch import save_file

from helpers.audio import decode
from helpers.clips import pyav_file, wav_bytes
from helpers.official import build_official_model, lm_state_dict
from helpers.serve_process import free_port
from polyvox.models.random_checkpoint import write_random_checkpoint
from polyvox.models.tokenizer import build_test_tokenizer
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.loaded_model import VoxCPM2

TEXT = "Hello world, this is a test."
PROMPT_TEXT = "今天天气很好。"
PATCH_SAMPLES = 4 * 1920
GEN = dict(max_len=6, min_len=2, inference_timesteps=4, cfg_value=2.0)


def _wav_bytes(seconds: float, rate: int = 16000, freq: float = 220.0, seed: int = 0) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    x = 0.3 * np.sin(2 * np.pi * freq * t) + 0.05 * np.random.default_rng(seed).standard_normal(t.shape)
    return wav_bytes(x, rate)


def _flac_stereo_44k(seconds: float) -> bytes:
    rate = 44100
    t = np.arange(int(seconds * rate)) / rate
    tone = (0.3 * np.sin(2 * np.pi * 330 * t)).astype(np.float32)
    return pyav_file(np.stack([tone, tone]).reshape(1, -1), rate, "flac", "flac", "stereo", "flt")


@pytest.fixture(scope="module")
def official_dir(tmp_path_factory):
    """(the official VoxCPM2Model, the checkpoint directory it was saved to in the official layout)."""
    directory = tmp_path_factory.mktemp("official_ckpt")
    config = VoxCPM2Config.tiny()
    build_test_tokenizer(directory, config.lm_config.vocab_size)
    config.to_json(directory / "config.json")
    model = build_official_model(config, directory, seed=0, std=0.15)
    with torch.no_grad():  # move the VAE off its initialisation, weight-norm magnitudes included
        for p in model.audio_vae.parameters():
            p.mul_(1 + 0.1 * torch.randn_like(p))
    save_file(lm_state_dict(model), str(directory / "model.safetensors"))
    torch.save({"state_dict": model.audio_vae.state_dict()}, directory / "audiovae.pth")
    (directory / "ref.wav").write_bytes(_wav_bytes(0.7, seed=1))
    (directory / "prompt.wav").write_bytes(_wav_bytes(0.5, freq=150.0, seed=2))
    return model, directory


@pytest.fixture(scope="module")
def ours(official_dir) -> VoxCPM2:
    return VoxCPM2.load(official_dir[1], device="cpu")


def _official_wave(model, seed: int, **kw) -> np.ndarray:
    torch.manual_seed(seed)
    return model.generate(target_text=TEXT, **GEN, **kw)[0].numpy()


def test_official_checkpoint_loads_with_fp32_vae_and_synthesises_48k_audio(ours):
    assert ours.sample_rate == 48000
    assert next(ours.vae.parameters()).dtype == torch.float32
    audio = ours.synthesize(TEXT, seed=1, **GEN)
    assert audio.dtype == np.float32
    assert audio.size > 0 and audio.size % PATCH_SAMPLES == 0
    assert np.isfinite(audio).all() and np.abs(audio).max() > 1e-3


def test_zero_shot_waveform_matches_official(official_dir, ours):
    model, _ = official_dir
    expected = _official_wave(model, seed=5)
    got = ours.synthesize(TEXT, seed=5, **GEN)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_reference_cloning_waveform_matches_official(official_dir, ours):
    model, directory = official_dir
    expected = _official_wave(model, seed=5, reference_wav_path=str(directory / "ref.wav"))
    got = ours.synthesize(TEXT, reference=(directory / "ref.wav").read_bytes(), seed=5, **GEN)
    zero_shot = ours.synthesize(TEXT, seed=5, **GEN)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    assert got.shape != zero_shot.shape or np.abs(got - zero_shot).max() > 1e-2  # the reference was used


def test_a_stereo_44k_reference_clones_as_the_official_code_does(official_dir, ours, tmp_path):
    model, _ = official_dir
    rate = 44100
    t = np.arange(int(0.8 * rate)) / rate
    noise = 0.05 * np.random.default_rng(3).standard_normal((2, t.size))
    planes = np.stack([0.3 * np.sin(2 * np.pi * 200 * t), 0.3 * np.sin(2 * np.pi * 260 * t)]) + noise
    data = pyav_file((planes * 32767).astype(np.int16), rate, "wav", "pcm_s16le", "stereo", "s16p")
    (tmp_path / "ref44.wav").write_bytes(data)
    expected = _official_wave(model, seed=9, reference_wav_path=str(tmp_path / "ref44.wav"))
    got = ours.synthesize(TEXT, reference=data, seed=9, **GEN)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_continuation_waveform_matches_official(official_dir, ours):
    model, directory = official_dir
    prompt = directory / "prompt.wav"
    expected = _official_wave(model, seed=7, prompt_wav_path=str(prompt), prompt_text=PROMPT_TEXT)
    got = ours.synthesize(TEXT, prompt_text=PROMPT_TEXT, prompt_audio=prompt.read_bytes(), seed=7, **GEN)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_reference_plus_continuation_waveform_matches_official(official_dir, ours):
    model, directory = official_dir
    ref, prompt = directory / "ref.wav", directory / "prompt.wav"
    expected = _official_wave(
        model, seed=8, reference_wav_path=str(ref), prompt_wav_path=str(prompt), prompt_text=PROMPT_TEXT
    )
    got = ours.synthesize(
        TEXT,
        reference=ref.read_bytes(),
        prompt_text=PROMPT_TEXT,
        prompt_audio=prompt.read_bytes(),
        seed=8,
        **GEN,
    )
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_voice_design_waveform_matches_official(official_dir, ours):
    model, _ = official_dir
    torch.manual_seed(6)
    expected = model.generate(target_text=f"(A calm, warm voice){TEXT}", **GEN)[0].numpy()
    got = ours.synthesize(TEXT, instructions="A calm, warm voice", seed=6, **GEN)
    zero_shot = ours.synthesize(TEXT, seed=6, **GEN)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    assert got.shape != zero_shot.shape or np.abs(got - zero_shot).max() > 1e-2  # the description was used


@pytest.mark.parametrize("mode", ["zero_shot", "continuation"])
def test_streamed_160ms_chunks_join_into_the_full_synthesis(official_dir, ours, mode):
    prompt = {} if mode == "zero_shot" else {"prompt_text": PROMPT_TEXT, "prompt_audio": _wav_bytes(0.5)}
    full = ours.synthesize(TEXT, seed=3, **prompt, **GEN)
    chunks = list(ours.synthesize(TEXT, seed=3, stream=True, **prompt, **GEN))
    assert all(c.shape == (PATCH_SAMPLES,) for c in chunks)
    np.testing.assert_allclose(np.concatenate(chunks), full, atol=1e-4, rtol=0)


def test_reference_in_another_format_and_rate_is_encoded_to_whole_patches(ours):
    feats = ours.encode_reference(_flac_stereo_44k(1.0))
    # 1 s at 16 kHz = 25 latent frames, right-padded to whole 4-frame patches
    assert feats.shape == (7, 4, ours.config.feat_dim)
    assert torch.isfinite(feats).all()


def test_random_bundle_equals_the_random_checkpoint_it_would_write(tmp_path):
    loaded = VoxCPM2.load(write_random_checkpoint(tmp_path / "ckpt", "tiny", seed=3), device="cpu")
    in_memory = VoxCPM2.random("tiny", device="cpu", seed=3)
    for (name, a), (_, b) in zip(
        loaded.lm.state_dict().items(), in_memory.lm.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(a, b, msg=name)
    kw = dict(seed=2, **GEN)
    np.testing.assert_allclose(
        in_memory.synthesize(TEXT, **kw), loaded.synthesize(TEXT, **kw), atol=1e-3, rtol=0
    )


def test_polyvox_say_speaks_with_a_checkpoint_the_official_code_wrote(official_dir, tmp_path):
    _, directory = official_dir
    out = tmp_path / "speech.wav"
    env = {"POLYVOX_CACHE_ENABLED": "false", "POLYVOX_VOICES_DIR": str(tmp_path / "voices")}
    result = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "say", "--model", str(directory), "--device", "cpu",
         "-f", "wav", "-o", str(out), TEXT],
        capture_output=True, timeout=300, env={**os.environ, **env},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    with av.open(str(out)) as container:
        stream = container.streams.audio[0]
        samples = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(stream)])
        # `say` writes the model's own rate (VoxCPM2's AudioVAE decodes at 48 kHz) when none is asked
        assert stream.rate == 48000
    # at least one 160 ms patch of speech, and not silence
    assert samples.size >= 0.16 * 48000
    assert np.abs(samples.astype(np.float32)).max() > 0


def test_polyvox_serve_speaks_48k_with_a_checkpoint_the_official_code_wrote(official_dir, tmp_path):
    """`polyvox serve --model DIR` on loopback, asked through the official `openai` client."""
    _, directory = official_dir
    port = free_port()
    env = {"POLYVOX_CACHE_ENABLED": "false", "POLYVOX_VOICES_DIR": str(tmp_path / "voices")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "polyvox.cli", "serve", "--model", str(directory), "--device", "cpu",
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env},
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                if httpx.get(f"{url}/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.2)
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=240)
        assert "voxcpm2" in {m.id for m in client.models.list()}
        bodies = [
            client.audio.speech.create(
                model="tts-1", voice="alloy", input=TEXT, response_format="wav",
                extra_body={"sample_rate": 48000, "seed": 4},
            ).content
            for _ in range(2)
        ]  # fmt: skip
    finally:
        process.terminate()
        process.wait(timeout=60)
    samples, rate = decode(bodies[0])
    assert rate == 48000
    assert samples.size >= PATCH_SAMPLES and samples.size % PATCH_SAMPLES == 0  # whole 160 ms patches
    assert np.abs(samples).max() > 1e-3
    np.testing.assert_array_equal(decode(bodies[1])[0], samples)  # same seed, same speech
