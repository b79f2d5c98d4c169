"""uttera-tts-vllm's environment names mean in polyvox what they meant there.

Read from its `.env.example` and `main_tts.py`: `CACHE_TTL_MINUTES` is a TTL in minutes where 0 (or
less) turns the audio cache off entirely; `AUDIO_CACHE_DIR` is the cache directory, empty meaning the
default one; `VLLM_GPU_MEM_UTIL`, `VLLM_MAX_NUM_SEQS`, `VLLM_MAX_NUM_BATCHED_TOKENS` and
`VOXCPM_INFERENCE_TIMESTEPS` go to the batching engine as its GPU memory share, most sequences per
step, token budget per step and default CFM steps. polyvox's own names win over them, and
polyvox's `POLYVOX_CACHE_TTL_MINUTES=0` keeps its own meaning: entries never expire.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from helpers.serve_process import polyvox_serve
from polyvox.backends.fake import FakeBackend
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.cache import default_cache_dir, open_cache
from polyvox.settings import Settings

UTTERA_NAMES = (
    "CACHE_TTL_MINUTES",
    "AUDIO_CACHE_DIR",
    "VLLM_GPU_MEM_UTIL",
    "VLLM_MAX_NUM_SEQS",
    "VLLM_MAX_NUM_BATCHED_TOKENS",
    "VOXCPM_INFERENCE_TIMESTEPS",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what each test sets: no uttera-tts-vllm names, and the cache on unless a test turns it off."""
    for name in UTTERA_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("POLYVOX_CACHE_ENABLED", raising=False)


def speak(url: str) -> httpx.Response:
    response = httpx.post(
        f"{url}/v1/audio/speech", json={"input": "Keep this private.", "response_format": "wav"}
    )
    assert response.status_code == 200
    return response


# --- CACHE_TTL_MINUTES ----------------------------------------------------------------------------


def test_cache_ttl_minutes_0_turns_the_cache_off_and_the_start_up_log_says_so(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {"CACHE_TTL_MINUTES": "0", "AUDIO_CACHE_DIR": str(cache), "POLYVOX_CACHE_ENABLED": ""}
    with polyvox_serve("--log-level", "info", env=env) as (process, url):
        assert [speak(url).headers["X-Cache"] for _ in range(2)] == ["DISABLED", "DISABLED"]
        process.terminate()
        log = process.communicate(timeout=60)[0]
    assert "audio cache off: CACHE_TTL_MINUTES=0 turns it off" in log
    assert not cache.exists() or not any(cache.iterdir())


def test_cache_ttl_minutes_below_0_also_turns_it_off_and_a_positive_one_is_the_ttl(monkeypatch) -> None:
    monkeypatch.setenv("CACHE_TTL_MINUTES", "-1")
    assert Settings().cache_enabled is False
    monkeypatch.setenv("CACHE_TTL_MINUTES", "60")
    settings = Settings()
    assert settings.cache_enabled and settings.cache_ttl_minutes == 60


def test_polyvox_cache_ttl_minutes_0_keeps_its_meaning_entries_never_expire(
    serve, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("POLYVOX_CACHE_TTL_MINUTES", "0")
    settings = Settings(cache_dir=tmp_path)
    assert settings.cache_enabled and settings.cache_ttl_minutes == 0
    assert open_cache(settings.cache_dir, settings.cache_max_bytes, settings.cache_ttl_minutes).ttl_s is None
    url = serve(FakeBackend(), cache_dir=str(tmp_path))
    assert [speak(url).headers["X-Cache"] for _ in range(2)] == ["MISS", "HIT"]


def test_polyvox_own_ttl_given_anywhere_wins_over_the_seed_name(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CACHE_TTL_MINUTES", "0")
    monkeypatch.setenv("POLYVOX_CACHE_TTL_MINUTES", "30")
    assert (Settings().cache_enabled, Settings().cache_ttl_minutes) == (True, 30)
    monkeypatch.delenv("POLYVOX_CACHE_TTL_MINUTES")
    assert Settings(cache_ttl_minutes=5).cache_enabled is True  # a flag
    config = tmp_path / "polyvox.toml"
    config.write_text("cache_ttl_minutes = 7\n")
    monkeypatch.setenv("POLYVOX_CONFIG", str(config))
    assert (Settings().cache_enabled, Settings().cache_ttl_minutes) == (True, 7)  # a config file


# --- AUDIO_CACHE_DIR ------------------------------------------------------------------------------


def test_audio_cache_dir_is_where_the_cache_lives(serve, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AUDIO_CACHE_DIR", str(tmp_path / "seed-cache"))
    url = serve(FakeBackend())
    speak(url)
    assert len(list((tmp_path / "seed-cache").glob("*.pcm"))) == 1


def test_an_empty_audio_cache_dir_means_the_default_directory_not_the_current_one(monkeypatch) -> None:
    monkeypatch.setenv("AUDIO_CACHE_DIR", "")
    assert Settings().cache_dir is None  # the cache then opens default_cache_dir()
    assert default_cache_dir() != Path(".")
    monkeypatch.setenv("AUDIO_CACHE_DIR", "/from/the/seed")
    monkeypatch.setenv("POLYVOX_CACHE_DIR", "/polyvox/own")
    assert Settings().cache_dir == Path("/polyvox/own")  # polyvox's own name wins


# --- VLLM_* and VOXCPM_INFERENCE_TIMESTEPS ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "where"),
    [
        ("VLLM_GPU_MEM_UTIL", "0.45", lambda backend: backend.config.gpu_memory_utilization),
        ("VLLM_MAX_NUM_SEQS", "32", lambda backend: backend.config.max_num_seqs),
        ("VLLM_MAX_NUM_BATCHED_TOKENS", "16384", lambda backend: backend.config.max_num_batched_tokens),
        ("VOXCPM_INFERENCE_TIMESTEPS", "12", lambda backend: backend.inference_timesteps),
    ],
)
def test_each_engine_name_reaches_the_batching_engine_as_it_did_in_uttera(
    monkeypatch, name, value, where
) -> None:
    """uttera-tts-vllm's own defaults (0.45, 32, 16384) are valid values here too."""
    monkeypatch.setenv(name, value)
    backend = VoxCPMBackend.from_settings(Settings(random_weights="tiny", device="cpu", num_kv_blocks=16))
    assert where(backend) == type(where(backend))(value)


def test_out_of_range_engine_values_are_refused_at_start(monkeypatch) -> None:
    for name, value in (
        ("VLLM_GPU_MEM_UTIL", "1.5"),
        ("VLLM_MAX_NUM_SEQS", "0"),
        ("VOXCPM_INFERENCE_TIMESTEPS", "0"),
    ):
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError):
            Settings()
        monkeypatch.delenv(name)


def test_unprefixed_polyvox_names_are_not_read(monkeypatch) -> None:
    """Only POLYVOX_* and uttera-tts-vllm's names: a stray CACHE_DIR or MAX_NUM_SEQS is somebody else's."""
    monkeypatch.setenv("CACHE_DIR", "/somebody/elses")
    monkeypatch.setenv("MAX_NUM_SEQS", "3")
    monkeypatch.setenv("INFERENCE_TIMESTEPS", "3")
    settings = Settings()
    assert (settings.cache_dir, settings.max_num_seqs, settings.inference_timesteps) == (None, 256, 10)
