"""The audio cache through a real server: X-Cache / X-Route for every path and opt-out, hits served
without the engine in every format and as streams, no stale hits, TTL, LRU eviction under the size
cap, concurrent writers, and a cache directory that cannot be written."""

from __future__ import annotations

import base64
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest

from helpers.audio import decode, pcm_samples
from helpers.metrics import scrape, value
from polyvox.backends.base import BackendCapabilities, SynthesisRequest
from polyvox.backends.fake import FakeBackend
from polyvox.cache import AudioCache

SPEECH = "/v1/audio/speech"
TEXT = "a sentence of fifty characters, more or less, ok!!"  # 1.0 s of tone


class CloningFakeBackend(FakeBackend):
    """The tone engine, willing to take a reference clip (it ignores it): ad-hoc cloning requests."""

    def validate(self, request: SynthesisRequest) -> None:
        if self.reject_marker in request.text:
            super().validate(request)


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.pcm"))


def speak(url: str, headers: dict | None = None, **fields) -> httpx.Response:
    response = httpx.post(
        f"{url}{SPEECH}", json={"input": TEXT, "response_format": "pcm", **fields}, headers=headers
    )
    assert response.status_code == 200, response.text
    return response


@pytest.fixture
def cached(serve, tmp_path):
    """`cached(engine=None, **settings)` -> (url, engine, cache dir) of a server with the cache on."""

    def start(backend=None, **overrides):
        backend = backend or FakeBackend()
        directory = tmp_path / "cache"
        overrides = {"cache_enabled": True, "cache_dir": directory, **overrides}
        return serve(backend, **overrides), backend, directory

    return start


def test_second_identical_request_is_a_hit_served_without_the_engine(cached) -> None:
    url, backend, directory = cached()
    first = speak(url)
    assert (first.headers["X-Cache"], first.headers["X-Route"]) == ("MISS", "HOT")
    second = speak(url)
    assert (second.headers["X-Cache"], second.headers["X-Route"]) == ("HIT", "CACHE")
    assert backend.started_requests == 1
    assert second.content == first.content
    assert len(entries(directory)) == 1
    samples = scrape(url)
    assert value(samples, "polyvox_cache_lookups_total", result="hit") == 1
    assert value(samples, "polyvox_cache_lookups_total", result="miss") == 1
    assert value(samples, "polyvox_cache_entries") == 1


@pytest.mark.parametrize("fmt", ["mp3", "wav", "flac", "opus", "aac"])
def test_a_hit_serves_any_format_like_a_fresh_synthesis(cached, fmt: str) -> None:
    url, backend, _ = cached()
    speak(url, response_format="wav")  # fill the cache through another format
    hit = speak(url, response_format=fmt)
    assert hit.headers["X-Cache"] == "HIT" and backend.started_requests == 1
    fresh = speak(url, response_format=fmt, cache=False)
    assert fresh.headers["X-Cache"] == "BYPASS" and backend.started_requests == 2
    hit_audio, hit_rate = decode(hit.content)
    fresh_audio, fresh_rate = decode(fresh.content)
    assert hit_rate == fresh_rate
    assert hit_audio.size == fresh_audio.size
    np.testing.assert_allclose(hit_audio, fresh_audio, atol=1e-4)


def test_server_side_speed_and_sample_rate_are_served_from_one_entry(cached) -> None:
    url, backend, _ = cached()
    speak(url)
    fast = speak(url, speed=2.0, sample_rate=16000)
    assert fast.headers["X-Cache"] == "HIT" and backend.started_requests == 1
    assert pcm_samples(fast.content).size / 16000 == pytest.approx(0.5, rel=0.05)


def test_streams_are_served_from_the_cache(cached) -> None:
    url, backend, _ = cached()
    whole = speak(url, response_format="mp3")
    chunked = speak(url, response_format="mp3", stream_format="audio")
    assert chunked.headers["X-Cache"] == "HIT"
    with httpx.stream(
        "POST", f"{url}{SPEECH}", json={"input": TEXT, "response_format": "mp3", "stream_format": "sse"}
    ) as response:
        assert response.headers["X-Cache"] == "HIT"
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    assert backend.started_requests == 1
    assert events[-1]["type"] == "speech.audio.done"
    sse = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert sse == chunked.content
    assert decode(chunked.content)[0].size == decode(whole.content)[0].size


@pytest.mark.parametrize(
    ("headers", "fields"),
    [
        ({}, {"cache": False}),
        ({"Cache-Control": "no-cache"}, {}),
        ({"Cache-Control": "max-age=0, no-store"}, {}),
    ],
)
def test_opting_out_bypasses_the_cache_both_ways(cached, headers, fields) -> None:
    url, backend, directory = cached()
    speak(url)
    bypass = speak(url, headers=headers, **fields)
    assert (bypass.headers["X-Cache"], bypass.headers["X-Route"]) == ("BYPASS", "HOT")
    assert backend.started_requests == 2
    speak(url, headers=headers, input="something else to say", **fields)
    assert len(entries(directory)) == 1  # bypassed answers are not stored either


@pytest.mark.parametrize("flag", ["0", "false", "no", "off"])
def test_multipart_cache_field_opts_out(cached, flag: str) -> None:
    url, backend, _ = cached()
    form = {"input": TEXT, "response_format": "pcm"}
    assert httpx.post(f"{url}{SPEECH}", files={**{k: (None, v) for k, v in form.items()}}).status_code == 200
    response = httpx.post(f"{url}{SPEECH}", files={k: (None, v) for k, v in {**form, "cache": flag}.items()})
    assert response.status_code == 200
    assert response.headers["X-Cache"] == "BYPASS" and backend.started_requests == 2


def test_one_off_cloning_is_adhoc_and_never_cached(cached) -> None:
    url, backend, directory = cached(CloningFakeBackend())
    clip = io_wav(tone(2.0, 220.0))
    for _ in range(2):
        response = httpx.post(
            f"{url}{SPEECH}",
            data={"input": TEXT, "response_format": "pcm"},
            files={"custom_voice_file": ("ref.wav", clip, "audio/wav")},
        )
        assert response.status_code == 200, response.text
        assert (response.headers["X-Cache"], response.headers["X-Route"]) == ("ADHOC", "ADHOC")
    assert backend.started_requests == 2 and entries(directory) == []


def io_wav(samples: np.ndarray, rate: int = 16000) -> bytes:
    import io
    import wave

    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((samples * 32767).astype("<i2").tobytes())
    return buffer.getvalue()


def test_cache_off_says_disabled(serve) -> None:
    backend = FakeBackend()
    url = serve(backend, cache_enabled=False)
    for _ in range(2):
        response = speak(url)
        assert (response.headers["X-Cache"], response.headers["X-Route"]) == ("DISABLED", "HOT")
    assert backend.started_requests == 2


@pytest.mark.parametrize(
    "change",
    [
        {"voice": "nova"},
        {"seed": 7},
        {"instructions": "whisper"},
        {"cfg_value": 1.5},
        {"inference_timesteps": 4},
        {"input": TEXT + " And more."},
    ],
)
def test_any_change_that_shapes_the_audio_is_a_miss(cached, change) -> None:
    url, backend, _ = cached()
    speak(url)
    assert speak(url, **change).headers["X-Cache"] == "MISS"
    assert speak(url, **change).headers["X-Cache"] == "HIT"
    assert backend.started_requests == 2


def test_native_speed_is_part_of_the_key(cached) -> None:
    url, backend, _ = cached(FakeBackend(native_speed=True))
    speak(url)
    assert speak(url, speed=2.0).headers["X-Cache"] == "MISS"
    assert backend.last_request.speed == 2.0


def test_whitespace_differences_share_an_entry(cached) -> None:
    url, backend, _ = cached()
    speak(url)
    assert speak(url, input="  " + TEXT.replace(" ", "  \t") + "\r\n").headers["X-Cache"] == "HIT"


def test_a_new_model_revision_is_never_served_stale(cached) -> None:
    url, backend, _ = cached()
    backend.info.extra["revision"] = "r1"
    speak(url)
    assert speak(url).headers["X-Cache"] == "HIT"
    backend.info.extra["revision"] = "r2"  # e.g. another checkpoint behind the same model id
    assert speak(url).headers["X-Cache"] == "MISS"


def tone(seconds: float, freq: float, rate: int = 16000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_re_registering_a_voice_is_never_served_stale(cached, tmp_path) -> None:
    backend = CloningFakeBackend()
    backend.info.capabilities = BackendCapabilities(cloning=True, voice_design=True)
    url, backend, _ = cached(backend, voices_dir=tmp_path / "voices")

    def register(freq: float) -> None:
        response = httpx.post(
            f"{url}/v1/audio/voices",
            data={"name": "bob", "consent": "true"},
            files={"audio": ("bob.wav", io_wav(tone(2.0, freq)), "audio/wav")},
        )
        assert response.status_code in (200, 201), response.text

    register(220.0)
    assert speak(url, voice="bob").headers["X-Cache"] == "MISS"
    assert speak(url, voice="bob").headers["X-Cache"] == "HIT"
    register(330.0)  # the same name, another recording
    assert speak(url, voice="bob").headers["X-Cache"] == "MISS"
    assert backend.started_requests == 2


def test_entries_expire_after_the_ttl(cached) -> None:
    import time

    url, backend, _ = cached(cache_ttl_minutes=0.02)  # 1.2 s
    speak(url)
    assert speak(url).headers["X-Cache"] == "HIT"
    time.sleep(1.5)
    assert speak(url).headers["X-Cache"] == "MISS"
    assert backend.started_requests == 2


def test_size_cap_evicts_least_recently_used(cached) -> None:
    one_entry = 24000 * 4 + 64  # 1 s of float32 at 24 kHz plus the header
    url, backend, directory = cached(cache_max_bytes=2 * one_entry + 100)
    texts = [TEXT, TEXT.upper(), TEXT[::-1]]
    speak(url, input=texts[0])
    speak(url, input=texts[1])
    assert speak(url, input=texts[0]).headers["X-Cache"] == "HIT"  # texts[0] is now the most recent
    speak(url, input=texts[2])  # over the cap: texts[1] goes
    assert len(entries(directory)) == 2
    assert sum(p.stat().st_size for p in entries(directory)) <= 2 * one_entry + 100
    assert speak(url, input=texts[0]).headers["X-Cache"] == "HIT"
    assert speak(url, input=texts[2]).headers["X-Cache"] == "HIT"
    assert speak(url, input=texts[1]).headers["X-Cache"] == "MISS"


def test_cache_survives_a_restart(serve, tmp_path) -> None:
    first = FakeBackend()
    url = serve(first, cache_enabled=True, cache_dir=tmp_path)
    original = speak(url)
    second = FakeBackend()
    url = serve(second, cache_enabled=True, cache_dir=tmp_path)
    again = speak(url)
    assert again.headers["X-Cache"] == "HIT" and second.started_requests == 0
    assert again.content == original.content


def test_a_damaged_entry_is_a_miss_not_an_error(cached) -> None:
    url, backend, directory = cached()
    speak(url)
    (entry,) = entries(directory)
    entry.write_bytes(entry.read_bytes()[:100])
    response = speak(url)
    assert response.headers["X-Cache"] == "MISS" and backend.started_requests == 2
    assert pcm_samples(response.content).size == 24000


def test_concurrent_identical_requests_leave_one_valid_entry(cached) -> None:
    url, backend, directory = cached(FakeBackend(chunk_delay_s=0.01))
    with ThreadPoolExecutor(8) as pool:
        bodies = list(pool.map(lambda _: speak(url).content, range(8)))
    assert all(body == bodies[0] for body in bodies)
    assert len(entries(directory)) == 1
    assert list(directory.glob("*.tmp")) == []
    assert speak(url).headers["X-Cache"] == "HIT"


def test_concurrent_writers_of_one_key(tmp_path) -> None:
    cache = AudioCache(tmp_path, max_bytes=10_000_000)
    signals = [np.full(4000, i / 100, np.float32) for i in range(16)]
    barrier = threading.Barrier(16)

    def write(samples):
        barrier.wait()
        return cache.put("k" * 64, samples, 24000)

    with ThreadPoolExecutor(16) as pool:
        assert all(pool.map(write, signals))
    got = cache.get("k" * 64)
    assert got is not None and got.sample_rate == 24000
    assert any(np.array_equal(got.samples, s) for s in signals)  # one writer's whole entry, never a mix
    assert len(cache) == 1 and cache.size_bytes == entries(tmp_path)[0].stat().st_size
    assert list(tmp_path.glob("*.tmp")) == []


def test_an_unusable_cache_directory_means_no_cache_not_errors(serve, tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    backend = FakeBackend()
    url = serve(backend, cache_enabled=True, cache_dir=blocker / "cache")
    for _ in range(2):
        assert speak(url).headers["X-Cache"] == "DISABLED"
    assert backend.started_requests == 2


def test_a_cache_directory_that_disappears_degrades_to_misses(cached) -> None:
    import shutil

    url, backend, directory = cached()
    speak(url)
    shutil.rmtree(directory)
    directory.write_text("now a file")  # writes and reads both fail from here on
    for text in (TEXT, TEXT.upper(), TEXT.upper()):
        response = speak(url, input=text)
        assert response.headers["X-Cache"] == "MISS"
        assert pcm_samples(response.content).size == 24000
    assert backend.started_requests == 4


def test_uttera_tts_vllms_cache_variables_configure_the_cache(serve, tmp_path, monkeypatch) -> None:
    directory = tmp_path / "seed-cache"
    monkeypatch.setenv("AUDIO_CACHE_DIR", str(directory))
    monkeypatch.setenv("CACHE_TTL_MINUTES", "0.02")  # 1.2 s
    backend = FakeBackend()
    url = serve(backend, cache_enabled=True)
    speak(url)
    assert len(entries(directory)) == 1
    assert speak(url).headers["X-Cache"] == "HIT"
    import time

    time.sleep(1.5)
    assert speak(url).headers["X-Cache"] == "MISS"
    assert backend.started_requests == 2
