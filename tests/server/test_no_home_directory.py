"""A user with no home directory (an arbitrary UID in a container: HOME unset, no passwd entry) is told in
one line which setting to give for each directory that defaults into the home, not shown a traceback;
given them, the server starts and the embedded voice speaks (its marked model kept in memory)."""

from __future__ import annotations

import io

import httpx
import pytest
import soundfile

from polyvox.backends.embedded import EmbeddedBackend
from polyvox.backends.fake import FakeBackend
from polyvox.runtime.startup import StartupError
from polyvox.server.app import create_app
from polyvox.settings import Settings


@pytest.fixture
def no_home(monkeypatch):
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "POLYVOX_VOICES_DIR", "POLYVOX_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid: int):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr("pwd.getpwuid", no_entry)


def test_the_audio_cache_in_its_default_place_names_cache_dir(no_home):
    with pytest.raises(StartupError, match=r"set cache_dir \(POLYVOX_CACHE_DIR\), or HOME$"):
        create_app(Settings(cache_enabled=True), FakeBackend())


def test_voices_in_their_default_place_name_voices_dir(no_home, tmp_path):
    with pytest.raises(StartupError, match=r"set voices_dir \(POLYVOX_VOICES_DIR\), or HOME$"):
        create_app(Settings(cache_enabled=True, cache_dir=tmp_path / "cache"), FakeBackend())


def test_given_both_the_server_starts_and_the_embedded_voice_speaks(no_home, tmp_path, serve):
    url = serve(
        EmbeddedBackend(max_workers=1),
        cache_enabled=True,
        cache_dir=tmp_path / "cache",
        voices_dir=tmp_path / "voices",
    )
    body = {"model": "tts-1", "voice": "alloy", "input": "Hello there.", "response_format": "wav"}
    response = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 200, response.text
    audio, rate = soundfile.read(io.BytesIO(response.content))
    assert len(audio) / rate > 0.4
