"""A backup of a voices directory, taken as docs/operations.md says while its server runs, restores: a
new server started on the copy speaks the uploaded voice, knows its consent recording, takes the named
key and refuses others, and keeps the usage counted before the backup."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import openai

from helpers.audio import decode
from helpers.serve_process import polyvox_serve
from voices.clips import wav_clip

TINY = ("--random-weights", "tiny", "--device", "cpu")


def make_key(voices: Path) -> str:
    command = [sys.executable, "-m", "polyvox.cli", "keys", "create", "team", "--json"]
    made = subprocess.run(
        [*command, "--voices-dir", str(voices)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(made.stdout)["key"]


def back_up(voices: Path, backup: Path) -> None:
    """docs/operations.md's backup of a running server's voices directory: the files copied, the usage
    database through SQLite's online backup."""
    shutil.copytree(voices, backup, ignore=shutil.ignore_patterns("usage.sqlite3*"))
    with sqlite3.connect(voices / "usage.sqlite3") as live, sqlite3.connect(backup / "usage.sqlite3") as copy:
        live.backup(copy)


def speak(client: openai.OpenAI, voice: str) -> float:
    speech = client.audio.speech.create(model="tts-1", voice=voice, input="Restored.", response_format="wav")
    samples, rate = decode(speech.content)
    return samples.size / rate


def test_a_voices_directory_backup_restores_voices_consents_keys_and_usage(tmp_path: Path) -> None:
    voices, backup = tmp_path / "voices", tmp_path / "backup"
    key = make_key(voices)
    with polyvox_serve(*TINY, "--voices-dir", str(voices)) as (_, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
        consent = client.audio.voice_consents.create(name="Ana", language="en", recording=wav_clip())
        client.audio.voices.create(name="ana", consent=consent.id, audio_sample=("ana.wav", wav_clip()))
        assert speak(client, "ana") > 0
        used = httpx.get(f"{url}/v1/usage", headers={"Authorization": f"Bearer {key}"}).json()["data"]
        back_up(voices, backup)
    shutil.rmtree(voices)  # the machine is gone

    with polyvox_serve(*TINY, "--voices-dir", str(backup)) as (_, url):
        restored = httpx.get(f"{url}/v1/usage", headers={"Authorization": f"Bearer {key}"}).json()["data"]
        assert used and restored == used
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
        assert speak(client, "ana") > 0
        assert client.audio.voice_consents.retrieve(consent.id).name == "Ana"
        stranger = openai.OpenAI(base_url=f"{url}/v1", api_key="not-a-key", max_retries=0)
        try:
            speak(stranger, "ana")
        except openai.AuthenticationError:
            pass
        else:
            raise AssertionError("a key that was never made was accepted")
