"""Named API keys end to end: made through /admin/keys or `polyvox keys`, used with the official
client, scoped, listed without their secrets, revoked (refused by a second server sharing the store
too); the keys of the settings keep working as before."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import openai
import pytest

from helpers.serve_process import polyvox_serve
from helpers.server import running_server
from helpers.waiting import wait_until
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.tenancy.key_store import FileKeyStore
from polyvox.server.tenancy.keys import KeyLimits, new_key
from polyvox.settings import Settings

ADMIN = "settings-admin-key"
USER = "settings-user-key"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[tuple[Path, str, str]]:
    """Two servers sharing one voices directory (as two API processes or servers sharing it do)."""
    voices = tmp_path_factory.mktemp("voices")
    settings = Settings(voices_dir=voices, api_keys=[USER], admin_api_keys=[ADMIN])
    with ExitStack() as stack:
        first, second = (
            stack.enter_context(running_server(create_app(settings, FakeBackend()))) for _ in range(2)
        )
        yield voices, first, second


def make_key(url: str, name: str, **body) -> dict:
    made = httpx.post(f"{url}/admin/keys", json={"name": name, **body}, headers=bearer(ADMIN))
    assert made.status_code == 201, made.text
    return made.json()


def speak(url: str, key: str) -> bytes:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    return client.audio.speech.create(model="tts-1", voice="alloy", input="hi", response_format="wav").content


def test_a_made_key_speaks_through_either_server_and_its_secret_is_shown_once(servers) -> None:
    voices, first, second = servers
    made = make_key(first, "team-speak", limits={"requests_per_minute": 100})
    assert set(made) >= {"id", "name", "key", "scopes", "limits", "created_at"}
    assert made["scopes"] == ["speech", "voices"] and made["limits"]["requests_per_minute"] == 100
    for url in (first, second):
        assert speak(url, made["key"])[:4] == b"RIFF"
    listed = httpx.get(f"{first}/admin/keys", headers=bearer(ADMIN)).json()["data"]
    mine = next(item for item in listed if item["id"] == made["id"])
    assert "key" not in mine and mine["last_used_at"] is not None
    stored = (voices / "keys.json").read_text()
    assert made["key"] not in stored  # only its SHA-256


def test_a_key_made_elsewhere_works_at_once_on_a_server_that_has_just_looked(servers) -> None:
    """A server has just read its key table (a request with a key it did not know made it look); a
    key is then made in the store they share (as `polyvox keys create` makes one, a few milliseconds):
    that server's first request with it is served, not refused because its last look was recent."""
    voices, _, second = servers
    for n in range(5):  # each time within a moment of the look, which a fixed pause would have waited out
        assert refused(second, "sk-polyvox-not-a-key-anyone-made")  # the second server has just looked
        secret, key = new_key(f"team-at-once-{n}", None, KeyLimits())
        FileKeyStore(voices).add(key)
        assert speak(second, secret)[:4] == b"RIFF"


def refused(url: str, key: str) -> bool:
    try:
        speak(url, key)
    except openai.AuthenticationError:
        return True
    return False


def test_a_revoked_key_is_refused_by_every_server(servers) -> None:
    _, first, second = servers
    made = make_key(first, "team-revoked")
    for url in (first, second):
        assert speak(url, made["key"])[:4] == b"RIFF"
    gone = httpx.delete(f"{first}/admin/keys/{made['id']}", headers=bearer(ADMIN))
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    for url in (first, second):  # each re-reads the key table within half a second
        wait_until(lambda url=url: refused(url, made["key"]), f"{url} refuses the revoked key")
    again = httpx.delete(f"{first}/admin/keys/{made['id']}", headers=bearer(ADMIN))
    assert again.status_code == 404 and again.json()["error"]["code"] == "key_not_found"


def test_scopes_decide_the_routes_a_key_reaches(servers) -> None:
    _, url, _ = servers
    speech_only = make_key(url, "team-speech-only", scopes=["speech"])["key"]
    voices_only = make_key(url, "team-voices-only", scopes=["voices"])["key"]
    admin = make_key(url, "team-admin", scopes=["admin"])["key"]
    assert speak(url, speech_only)[:4] == b"RIFF"
    refused = httpx.get(f"{url}/v1/audio/voices", headers=bearer(speech_only))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "insufficient_scope"
    assert httpx.get(f"{url}/v1/audio/voices", headers=bearer(voices_only)).status_code == 200
    with pytest.raises(openai.PermissionDeniedError):
        speak(url, voices_only)
    for key in (speech_only, voices_only):
        listing = httpx.get(f"{url}/admin/keys", headers=bearer(key))
        assert listing.status_code == 403 and listing.json()["error"]["code"] == "admin_key_required"
    assert httpx.get(f"{url}/admin/keys", headers=bearer(admin)).status_code == 200
    assert speak(url, admin)[:4] == b"RIFF"  # admin reaches everything
    assert httpx.get(f"{url}/v1/models", headers=bearer(speech_only)).status_code == 200


def test_bad_key_requests_are_4xx_in_openais_shape(servers) -> None:
    _, url, _ = servers
    make_key(url, "team-unique")
    cases = [
        ({"name": "team-unique"}, 409, "key_name_taken"),
        ({"name": "has space"}, 400, "invalid_value"),
        ({"name": "ok-name", "scopes": ["root"]}, None, None),
        ({"name": "ok-name2", "limits": {"requests_per_minute": 0}}, None, None),
    ]
    for body, status, code in cases:
        answer = httpx.post(f"{url}/admin/keys", json=body, headers=bearer(ADMIN))
        assert 400 <= answer.status_code < 500, (body, answer.text)
        error = answer.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        if status is not None:
            assert (answer.status_code, error["code"]) == (status, code)


def test_the_settings_keys_keep_working(servers) -> None:
    _, url, _ = servers
    assert speak(url, USER)[:4] == b"RIFF"
    assert httpx.get(f"{url}/admin/keys", headers=bearer(USER)).status_code == 403
    with pytest.raises(openai.AuthenticationError):
        speak(url, "not-a-key")


def polyvox_keys(voices: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "keys", *args, "--voices-dir", str(voices)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_cli_makes_lists_and_revokes_keys_a_running_server_honours(servers) -> None:
    voices, url, _ = servers
    made = json.loads(
        polyvox_keys(voices, "create", "team-cli", "--rpm", "7", "--max-streams", "2", "--json")
    )
    assert speak(url, made["key"])[:4] == b"RIFF"
    listed = polyvox_keys(voices, "list")
    assert "team-cli" in listed and "rpm=7" in listed and made["key"] not in listed
    polyvox_keys(voices, "revoke", made["id"])
    wait_until(lambda: refused(url, made["key"]), "the server refuses the key the CLI revoked")


def test_a_server_with_only_named_keys_is_closed(tmp_path) -> None:
    made = json.loads(polyvox_keys(tmp_path, "create", "only-one", "--json"))
    app = create_app(Settings(voices_dir=tmp_path), FakeBackend())
    with running_server(app) as url:
        with pytest.raises(openai.AuthenticationError):
            speak(url, "anything")
        assert speak(url, made["key"])[:4] == b"RIFF"


def test_polyvox_serve_with_only_named_keys_is_not_warned_of_as_open(tmp_path) -> None:
    made = json.loads(polyvox_keys(tmp_path, "create", "the-only-key", "--json"))
    flags = ("--no-cache-enabled", "--voices-dir", str(tmp_path))
    with polyvox_serve(*flags, host="0.0.0.0") as (proc, url):
        assert httpx.post(f"{url}/v1/audio/speech", json={"input": "hi", "voice": "alloy"}).status_code == 401
        assert speak(url, made["key"])[:4] == b"RIFF"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        log = proc.stdout.read()
    assert "no API key" not in log
