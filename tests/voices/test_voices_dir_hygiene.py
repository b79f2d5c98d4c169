"""The voices directory stays clean and honest: what a crash mid-write leaves (temporary files, a clip
no registry names) is swept at start; a refused upload writes nothing; a lost `voices.json` (clips
remain, the registry is gone) is reported at start and by `/admin/reload-voices`, its clips are kept
and changes are refused, while a fresh directory without one is normal. Storage is engine-agnostic:
a fake engine that clones serves here."""

from __future__ import annotations

import json
import logging
import uuid

import httpx

from polyvox.backends.fake import FakeBackend
from voices.clips import wav_clip


def upload(url: str, name: str, **fields) -> httpx.Response:
    form = {"name": name, "consent": "true", **fields}
    return httpx.post(f"{url}/v1/audio/voices", data=form, files={"audio": ("clip.wav", wav_clip())})


def leftover(folder, name: str) -> str:
    """A temporary file as an interrupted atomic write leaves it."""
    path = folder / f".{name}.{uuid.uuid4().hex}.tmp"
    path.write_bytes(b"half written")
    return path.name


def files(folder) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


def test_what_a_crash_mid_write_left_is_swept_at_start(serve, tmp_path):
    url = serve(FakeBackend(cloning=True), voices_dir=tmp_path)
    assert upload(url, "anna").status_code == 201
    consent = httpx.post(
        f"{url}/v1/audio/voice_consents",
        data={"name": "Anna", "language": "en"},
        files={"recording": ("c.wav", wav_clip(2.0))},
    ).json()
    kept = files(tmp_path) | files(tmp_path / "uploads") | files(tmp_path / "consents")
    planted = {
        leftover(tmp_path, "voices.json"),
        leftover(tmp_path, "consents.json"),
        leftover(tmp_path / "uploads", "bob.0123456789ab.wav"),
        leftover(tmp_path / "consents", "cons_x.wav"),
    }
    (tmp_path / "uploads" / "bob.0123456789ab.wav").write_bytes(wav_clip())  # written, never registered
    (tmp_path / "consents" / "cons_gone.wav").write_bytes(wav_clip())
    planted |= {"bob.0123456789ab.wav", "cons_gone.wav"}
    (tmp_path / "hand-placed.wav").write_bytes(wav_clip())  # an admin's own file: not ours to sweep

    url = serve(FakeBackend(cloning=True), voices_dir=tmp_path)  # a restart on the same directory
    now = files(tmp_path) | files(tmp_path / "uploads") | files(tmp_path / "consents")
    assert now == kept | {"hand-placed.wav"} and not planted & now
    assert httpx.get(f"{url}/v1/audio/voices/anna").status_code == 200
    assert httpx.get(f"{url}/v1/audio/voice_consents/{consent['id']}").status_code == 200


def test_an_upload_refused_for_an_unreadable_registry_writes_nothing(serve, tmp_path):
    url = serve(FakeBackend(cloning=True), voices_dir=tmp_path)
    assert upload(url, "anna").status_code == 201
    (tmp_path / "voices.json").write_text("{ not json")
    before = files(tmp_path / "uploads")
    refused = upload(url, "bob")
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "voice_storage_unavailable"
    assert files(tmp_path / "uploads") == before

    consents_before = files(tmp_path / "consents")
    (tmp_path / "consents.json").write_text("[]")
    refused = httpx.post(
        f"{url}/v1/audio/voice_consents",
        data={"name": "Bob", "language": "en"},
        files={"recording": ("c.wav", wav_clip(2.0))},
    )
    assert refused.status_code == 503 and files(tmp_path / "consents") == consents_before


def test_a_lost_registry_is_reported_its_clips_kept_and_changes_refused(serve, tmp_path, caplog):
    url = serve(FakeBackend(cloning=True), voices_dir=tmp_path)
    assert upload(url, "anna").status_code == 201
    clips = files(tmp_path / "uploads")
    (tmp_path / "voices.json").unlink()

    report = httpx.post(f"{url}/admin/reload-voices").json()
    assert report["voices"] == []
    (problem,) = report["problems"]
    assert "voices.json is missing" in problem and "1 voice clip" in problem
    refused = upload(url, "bob")
    assert refused.status_code == 503 and "voices.json is missing" in refused.json()["error"]["message"]

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        serve(
            FakeBackend(cloning=True), voices_dir=tmp_path
        )  # a restart neither sweeps the clips nor stays silent
    assert any("voices.json is missing" in r.getMessage() for r in caplog.records)
    assert files(tmp_path / "uploads") == clips


def test_a_fresh_voices_directory_without_a_registry_is_normal(serve, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        url = serve(FakeBackend(cloning=True), voices_dir=tmp_path / "fresh")
    assert not [r for r in caplog.records if "voices" in r.name]
    assert httpx.post(f"{url}/admin/reload-voices").json()["problems"] == []
    assert upload(url, "anna").status_code == 201
    assert json.loads((tmp_path / "fresh" / "voices.json").read_text())["voices"].keys() == {"anna"}
